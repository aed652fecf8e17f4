package web_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
)

// benchServe measures one page's server-side render (read model + HTML) on the 500 nodes x 16 devices
// snapshot and reports the median in milliseconds.
func benchServe(b *testing.B, path string) {
	snap := console.FromObjects(consoletest.Large(500, 16), consoletest.At)
	h := web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap})})
	var times []time.Duration
	var size int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		times = append(times, time.Since(start))
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: status %d", path, rec.Code)
		}
		size = rec.Body.Len()
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(size)/1024, "KiB-page")
}

func BenchmarkOverview500x16(b *testing.B) { benchServe(b, "/") }

func BenchmarkNode500x16(b *testing.B) { benchServe(b, "/nodes/"+consoletest.LargeNodeName(250)) }

func BenchmarkNodeAPI500x16(b *testing.B) {
	benchServe(b, "/api/v1/nodes/"+consoletest.LargeNodeName(250))
}
