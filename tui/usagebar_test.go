package tui

import "testing"

// TestUsageBar: a thin pool's usage is drawn to scale with its threshold marked where new volumes stop.
func TestUsageBar(t *testing.T) {
	p := func(f float64) *float64 { return &f }
	for _, tc := range []struct {
		used      *float64
		threshold float64
		want      string
	}{
		{p(30), 90, "[██████░░░░░░░░░░░░|░] 30.0% (limit 90%)"},
		{p(100), 60, "[████████████|███████] 100.0% (limit 60%)"},
		{nil, 75, "[░░░░░░░░░░░░░░░|░░░░] – (limit 75%)"},
		{p(0), 100, "[░░░░░░░░░░░░░░░░░░░░] 0.0% (limit 100%)"},
	} {
		if got := usageBar(tc.used, tc.threshold); got != tc.want {
			t.Errorf("usageBar(%v, %v) = %q\nwant %q", tc.used, tc.threshold, got, tc.want)
		}
	}
}
