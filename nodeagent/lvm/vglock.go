package lvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultLockDir holds the VG locks: lvm2's own lock directory, which the node agent's pod shares with the
// host, so `lvms lvmd` on the host and the agent in its pod see the same locks.
const DefaultLockDir = "/run/lock/lvm"

// LockVG takes LVMS's lock of a volume group: an exclusive flock on <dir>/lvms_<vg>.lock. Whoever creates
// volumes (lvmd) and whoever removes the volume group or its pools (the agent) hold it, so a volume cannot
// appear between the check that a pool is empty and its removal. It is not lvm2's lock (lvm2 takes that
// itself for each command). It waits until ctx ends; unlock releases it.
func LockVG(ctx context.Context, dir, vg string) (unlock func(), err error) {
	if dir == "" {
		dir = DefaultLockDir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock volume group %s: %w", vg, err)
	}
	path := filepath.Join(dir, "lvms_"+vg+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock volume group %s: %w", vg, err)
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock volume group %s (%s): %w", vg, path, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = f.Close()
			return nil, fmt.Errorf("lock volume group %s: still held by another change after waiting (%s): %w", vg, path, ctx.Err())
		case <-t.C:
		}
	}
}
