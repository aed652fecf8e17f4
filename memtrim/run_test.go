package memtrim

import (
	"context"
	"errors"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestRun: nothing before the delay, the heap trimmed and the binary paged out at it and every interval
// after, and Run ends with its context; a failing page-out is reported once and not tried again, while the
// heap is still trimmed.
func TestRun(t *testing.T) {
	var calls, heaps atomic.Int32
	freeHeap = func() { heaps.Add(1) }
	t.Cleanup(func() { freeHeap = debug.FreeOSMemory })
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
	step := func(d time.Duration, want, wantHeaps int32) {
		t.Helper()
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(d)
		for i := 0; heaps.Load() < wantHeaps && i < 5000; i++ {
			time.Sleep(time.Millisecond)
		}
		for i := 0; calls.Load() < want && i < 5000; i++ {
			time.Sleep(time.Millisecond)
		}
		if got, gotHeaps := calls.Load(), heaps.Load(); got != want || gotHeaps != wantHeaps {
			t.Fatalf("after %s: %d page-outs and %d heap trims, want %d and %d", d, got, gotHeaps, want, wantHeaps)
		}
	}
	step(29*time.Second, 0, 0)
	step(time.Second, 1, 1)
	step(time.Minute, 2, 2)
	step(time.Minute, 3, 3) // fails: reported, not tried again
	step(time.Minute, 3, 4)
	cancel()
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
