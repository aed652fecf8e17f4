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
	if _, err := RSSKiB(1 << 30); err == nil {
		t.Error("a process that does not exist has a resident set size")
	}
}
