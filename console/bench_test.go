package console_test

import (
	"fmt"
	"testing"

	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

// BenchmarkBuildOverview measures the overview of a snapshot seen for the first time (the pages and the TUI
// reuse it for that snapshot): what every change to a live cluster costs. Under make test's smoke
// (benchsmoke), 500 nodes only.
func BenchmarkBuildOverview(b *testing.B) {
	for _, nodes := range benchsmoke.Sizes(500, 5000) {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			snap := console.FromObjects(consoletest.Large(nodes, 16), consoletest.At)
			b.ReportAllocs()
			for b.Loop() {
				fresh := *snap // a copy has no views yet
				console.BuildOverview(&fresh)
			}
		})
	}
}
