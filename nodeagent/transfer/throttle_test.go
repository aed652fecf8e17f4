package transfer

import (
	"context"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lvms-dev/lvms/api/move"
)

// recorder is a Reporter that keeps what it was given.
type recorder struct{ got []string }

func (r *recorder) Annotate(_ context.Context, lv, key, value string) error {
	r.got = append(r.got, lv+" "+key+"="+value)
	return nil
}

// The receiver reports every synced step; the API server gets at most one progress annotation per second
// and LogicalVolume, and always the last one (n/n). Every other annotation, and an empty progress (a
// clean-up), goes through at once; LogicalVolumes are throttled each on its own.
func TestThrottledProgress_OnePerSecondPerVolume_TheLastAlways(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	rec := &recorder{}
	tp := &throttledProgress{Reporter: rec, clock: clk, last: map[string]time.Time{}}
	p := move.AnnotationProgress
	step := func(d time.Duration, lv, key, value string) {
		clk.SetTime(clk.Now().Add(d))
		if err := tp.Annotate(t.Context(), lv, key, value); err != nil {
			t.Fatal(err)
		}
	}
	step(0, "a", p, "1/10")                        // the first: through
	step(500*time.Millisecond, "a", p, "2/10")     // half a second later: skipped
	step(0, "b", p, "1/4")                         // another volume: through
	step(0, "a", move.AnnotationCopyError, "boom") // another key: through
	step(0, "a", p, "")                            // a clean-up: through
	step(499*time.Millisecond, "a", p, "3/10")     // 999 ms after the first: skipped
	step(time.Millisecond, "a", p, "4/10")         // a second after it: through
	step(0, "a", p, "10/10")                       // the last: through at once
	step(0, "a", p, "1/10")                        // a new copy after the last: through
	want := []string{
		"a " + p + "=1/10", "b " + p + "=1/4", "a " + move.AnnotationCopyError + "=boom", "a " + p + "=",
		"a " + p + "=4/10", "a " + p + "=10/10", "a " + p + "=1/10",
	}
	if !slices.Equal(rec.got, want) {
		t.Errorf("passed on:\n%q\nwant:\n%q", rec.got, want)
	}
}
