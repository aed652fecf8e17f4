package testenv

import (
	"os"
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
