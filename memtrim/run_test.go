package memtrim

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestRun: nothing before the delay, a page-out at it and every interval after, and Run ends with its
// context; a failing page-out is reported once and ends it.
func TestRun(t *testing.T) {
	var calls atomic.Int32
	fail := errors.New("EINVAL")
	var failAt int32 = 3
	pageOut = func() (uint64, error) {
		if calls.Add(1) == failAt {
			return 0, fail
		}
		return 1, nil
	}
	t.Cleanup(func() { pageOut = PageOut })
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var reported []error
	go func() {
		Run(ctx, clk, 30*time.Second, time.Minute, func(err error) { reported = append(reported, err) })
		close(done)
	}()
	step := func(d time.Duration, want int32) {
		t.Helper()
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(d)
		for i := 0; calls.Load() < want && i < 5000; i++ {
			time.Sleep(time.Millisecond)
		}
		if got := calls.Load(); got != want {
			t.Fatalf("after %s: %d page-outs, want %d", d, got, want)
		}
	}
	step(29*time.Second, 0)
	step(time.Second, 1)
	step(time.Minute, 2)
	step(time.Minute, 3) // fails: reported, Run ends
	<-done
	if len(reported) != 1 || !errors.Is(reported[0], fail) {
		t.Errorf("reported %v, want the one failure", reported)
	}

	// Cancelled before its first page-out, Run returns without one.
	calls.Store(0)
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() { Run(ctx2, clk, time.Hour, time.Hour, func(error) {}); close(done2) }()
	cancel2()
	<-done2
	if calls.Load() != 0 {
		t.Errorf("%d page-outs after cancel", calls.Load())
	}
}
