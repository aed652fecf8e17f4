package benchsmoke

import (
	"slices"
	"testing"
	"time"
)

// TestSizes_SmallestOnlyUnderTheSmoke: make bench (no LVMS_BENCH_SMOKE) gets every size and wait as the
// benchmark wrote them; make test's smoke gets the smallest size and no idle wait.
func TestSizes_SmallestOnlyUnderTheSmoke(t *testing.T) {
	for _, value := range []string{"", "0", "1"} {
		t.Run(Env+"="+value, func(t *testing.T) {
			t.Setenv(Env, value)
			smoke := value == "1"
			if On() != smoke {
				t.Fatalf("On() = %v with %s=%q", On(), Env, value)
			}
			wantSize, wantSizes, wantIdle := 5000, []int{5000, 500}, time.Minute
			if smoke {
				wantSize, wantSizes, wantIdle = 20, []int{500}, 0
			}
			if got := Size(5000, 20); got != wantSize {
				t.Errorf("Size(5000, 20) = %d, want %d", got, wantSize)
			}
			if got := Sizes(5000, 500); !slices.Equal(got, wantSizes) {
				t.Errorf("Sizes(5000, 500) = %v, want %v", got, wantSizes)
			}
			if got := Sizes(64); !slices.Equal(got, []int{64}) {
				t.Errorf("Sizes(64) = %v, want [64]", got)
			}
			if got := Idle(time.Minute); got != wantIdle {
				t.Errorf("Idle(1m) = %v, want %v", got, wantIdle)
			}
		})
	}
}
