package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
)

// benchSizes are the clusters the console is measured on: nodes, each with 16 devices.
var benchSizes = []int{500, 5000}

// benchServe measures one page's server-side render (read model + HTML) on a snapshot of nodes x 16
// devices and reports the median in milliseconds. make bench records the overview at 5,000 nodes.
func benchServe(b *testing.B, path func(nodes int) string) {
	for _, nodes := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			snap := console.FromObjects(consoletest.Large(nodes, 16), consoletest.At)
			h := web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap})})
			var times []time.Duration
			var size int
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path(nodes), nil))
				times = append(times, time.Since(start))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: status %d", path(nodes), rec.Code)
				}
				size = rec.Body.Len()
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(float64(size)/1024, "KiB-page")
		})
	}
}

func BenchmarkOverview(b *testing.B) { benchServe(b, func(int) string { return "/" }) }

func BenchmarkNode(b *testing.B) {
	benchServe(b, func(nodes int) string { return "/nodes/" + consoletest.LargeNodeName(nodes/2) })
}

func BenchmarkNodeAPI(b *testing.B) {
	benchServe(b, func(nodes int) string { return "/api/v1/nodes/" + consoletest.LargeNodeName(nodes/2) })
}
