package testenv

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// TestRSSKiB reads this process's resident memory, by PID or as itself; a PID that does not exist is an error.
func TestRSSKiB(t *testing.T) {
	self, err := RSSKiB(0)
	if err != nil || self <= 0 {
		t.Fatalf("this process: %d KiB, %v", self, err)
	}
	if byPID, err := RSSKiB(os.Getpid()); err != nil || byPID <= 0 {
		t.Fatalf("by PID: %d KiB, %v", byPID, err)
	}
	if anon, err := AnonKiB(0); err != nil || anon <= 0 || anon > self*2 {
		t.Fatalf("anonymous part: %d KiB of %d, %v", anon, self, err)
	}
	if _, err := RSSKiB(1 << 30); err == nil {
		t.Error("a process that does not exist has a resident set size")
	}
}

// TestPeakRSS: the peak is at least an earlier size, grows with a large allocation and drops back after a
// reset once the memory is returned.
func TestPeakRSS(t *testing.T) {
	now, _ := RSSKiB(0)
	peak, err := PeakRSSKiB(0)
	if err != nil {
		t.Fatal(err)
	}
	if peak < now {
		t.Fatalf("peak %d KiB below current %d KiB", peak, now)
	}
	big := make([]byte, 256<<20)
	for i := range big {
		if i%4096 == 0 {
			big[i] = 1
		}
	}
	grown, _ := PeakRSSKiB(0)
	if grown < peak+200<<10 {
		t.Fatalf("peak %d KiB after touching 256 MiB, was %d KiB", grown, peak)
	}
	big = nil
	runtime.GC()
	debug.FreeOSMemory()
	if err := ResetPeakRSS(); err != nil {
		t.Fatal(err)
	}
	if after, _ := PeakRSSKiB(0); after >= grown-200<<10 {
		t.Fatalf("peak %d KiB after the memory was returned and the peak reset, was %d KiB", after, grown)
	}
	_ = big
}

// TestCPUSeconds: this process's CPU time grows with work it does.
func TestCPUSeconds(t *testing.T) {
	before, err := CPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := 0; i < 300_000_000; i++ {
		x += i % 7
	}
	after, _ := CPUSeconds(os.Getpid())
	if after <= before {
		t.Errorf("CPU time %.2f s after a busy loop (%d), was %.2f s", after, x, before)
	}
	if _, err := CPUSeconds(1 << 30); err == nil {
		t.Error("a process that does not exist has a CPU time")
	}
}
