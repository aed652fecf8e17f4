package lvm

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestLockVG_ExcludesUntilUnlocked(t *testing.T) {
	dir := t.TempDir()
	unlock, err := LockVG(context.Background(), dir, "vg1")
	if err != nil {
		t.Fatal(err)
	}
	// Another holder (a separate open file, as another process would have) waits; a different VG does not.
	other, err := LockVG(context.Background(), dir, "vg2")
	if err != nil {
		t.Fatalf("a lock on vg2 waited for vg1's: %v", err)
	}
	other()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := LockVG(ctx, dir, "vg1"); err == nil || !strings.Contains(err.Error(), "still held") {
		t.Fatalf("second lock of vg1 while held: %v, want it to wait and give up with the context", err)
	}
	unlock()
	again, err := LockVG(context.Background(), dir, "vg1")
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}
