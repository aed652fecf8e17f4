package csicontroller

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestKeyLocks: calls for one key run one at a time however many wait, calls for other keys do not wait for
// them, and a key nobody holds is forgotten (the controller sees every CSI name and volume ID once).
func TestKeyLocks(t *testing.T) {
	var k keyLocks
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			unlock := k.lock("pvc-1")
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			unlock()
		})
	}
	// Another key is not held up meanwhile.
	done := make(chan struct{})
	go func() {
		k.lock("pvc-2")()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("another key waited")
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d calls for one key ran at once", m)
	}
	for i := range 100 {
		k.lock(fmt.Sprintf("pvc-%d", i))()
	}
	if n := len(k.locks); n != 0 {
		t.Errorf("%d keys remembered after every call returned", n)
	}
}
