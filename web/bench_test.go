package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
)

// benchSizes are the clusters the console is measured on: nodes, each with 16 devices (under make test's
// smoke, benchsmoke, the smaller only).
var benchSizes = []int{500, 5000}

// benchServe measures one page's server-side render on a snapshot of nodes x 16 devices, as the first
// request after the cluster changed (the read model built from the new snapshot, then the HTML: the figure
// make bench records) and as the next request for the same snapshot (the model reused). It reports both
// medians in milliseconds.
func benchServe(b *testing.B, path func(nodes int) string) {
	for _, nodes := range benchsmoke.Sizes(benchSizes...) {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			snap := console.FromObjects(consoletest.Large(nodes, 16), consoletest.At)
			var cold, warm []time.Duration
			var size int
			serve := func(h http.Handler) time.Duration {
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path(nodes), nil))
				took := time.Since(start)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: status %d", path(nodes), rec.Code)
				}
				size = rec.Body.Len()
				return took
			}
			b.ReportAllocs()
			for b.Loop() {
				fresh := *snap // a copy shares no views with earlier iterations: a changed cluster
				h := web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: &fresh})})
				cold = append(cold, serve(h))
				warm = append(warm, serve(h))
			}
			b.ReportMetric(median(cold), "ms-median")
			b.ReportMetric(median(warm), "warm-ms-median")
			b.ReportMetric(float64(size)/1024, "KiB-page")
		})
	}
}

func median(times []time.Duration) float64 {
	slices.Sort(times)
	return float64(times[len(times)/2].Microseconds()) / 1000
}

func BenchmarkOverview(b *testing.B) { benchServe(b, func(int) string { return "/" }) }

func BenchmarkNode(b *testing.B) {
	benchServe(b, func(nodes int) string { return "/nodes/" + consoletest.LargeNodeName(nodes/2) })
}

func BenchmarkNodeAPI(b *testing.B) {
	benchServe(b, func(nodes int) string { return "/api/v1/nodes/" + consoletest.LargeNodeName(nodes/2) })
}
