package tui_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/tui"
)

// BenchmarkFirstFrame measures the TUI's first frame on snapshots of 500 and 5,000 nodes x 16 devices:
// the model receives its size and the snapshot (building the overview) and renders the screen. It
// reports the median in milliseconds. Under make test's smoke (benchsmoke), 500 nodes only.
func BenchmarkFirstFrame(b *testing.B) {
	for _, nodes := range benchsmoke.Sizes(500, 5000) {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			snap := console.FromObjects(consoletest.Large(nodes, 16), consoletest.At)
			var times []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				fresh := *snap // a copy shares no views with earlier iterations: the TUI's start
				start := time.Now()
				m := tui.New(tui.Options{Source: console.Static{Snap: &fresh}, Renderer: renderer()})
				m.Update(tea.WindowSizeMsg{Width: 160, Height: 48})
				m.Update(m.Init()().(tea.BatchMsg)[0]())
				if frame := m.View(); len(frame) == 0 {
					b.Fatal("empty frame")
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
		})
	}
}
