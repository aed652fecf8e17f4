package groupsnapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// thinLV is what the kernel side of a group needs to know about a thin LV: its device ID in the pool.
type thinLV struct {
	Name   string
	Pool   string
	Attr   string
	ThinID uint64
}

// thinLVs reads the thin device IDs of the LVs of vg (lvm2 knows them; its full report does not ask).
func (e *Engine) thinLVs(ctx context.Context, vg string) (map[string]thinLV, error) {
	out, err := e.runner.LVMCmd(ctx, "lvs", "--reportformat", "json", "-o", "lv_name,pool_lv,lv_attr,thin_id", vg)
	if err != nil {
		return nil, fmt.Errorf("read the thin device IDs of volume group %s: %w", vg, err)
	}
	return parseThinLVs(out)
}

func parseThinLVs(out []byte) (map[string]thinLV, error) {
	var rep struct {
		Report []struct {
			LV []map[string]string `json:"lv"`
		} `json:"report"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("parse lvs output: %w", err)
	}
	lvs := map[string]thinLV{}
	for _, r := range rep.Report {
		for _, row := range r.LV {
			lv := thinLV{Name: strings.Trim(row["lv_name"], "[]"), Pool: row["pool_lv"], Attr: row["lv_attr"]}
			if s := strings.TrimSpace(row["thin_id"]); s != "" {
				id, err := strconv.ParseUint(s, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("parse lvs output: LV %s has thin_id %q", lv.Name, s)
				}
				lv.ThinID = id
			}
			lvs[lv.Name] = lv
		}
	}
	return lvs, nil
}

// poolDevice is the device-mapper name of a thin pool's kernel pool (the one that takes messages).
func poolDevice(vg, pool string) string { return DMName(vg, pool) + "-tpool" }

// message sends a message to a thin pool.
func (e *Engine) message(ctx context.Context, vg, pool, msg string) error {
	if _, err := e.runner.Run(ctx, "dmsetup", "message", poolDevice(vg, pool), "0", msg); err != nil {
		return fmt.Errorf("thin pool %s/%s: %s: %w", vg, pool, msg, err)
	}
	return nil
}

// exists reports whether a failed message failed because the thin device exists already.
func exists(err error) bool {
	ce, ok := lvm.AsCommandError(err)
	return ok && strings.Contains(ce.Stderr, "File exists")
}

// lockLVM2 takes lvm2's own lock of volume group vg (the flock lvm2 commands take on V_<vg> in its lock
// directory), so that no lvm2 command changes the pool while the group sends it messages. It waits until
// ctx ends.
func lockLVM2(ctx context.Context, dir, vg string) (unlock func(), err error) {
	if dir == "" {
		dir = lvm.DefaultLockDir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("take lvm2's lock of volume group %s: %w", vg, err)
	}
	path := filepath.Join(dir, "V_"+vg)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("take lvm2's lock of volume group %s: %w", vg, err)
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("take lvm2's lock of volume group %s (%s): %w", vg, path, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = f.Close()
			return nil, fmt.Errorf("take lvm2's lock of volume group %s: an lvm2 command holds it (%s): %w", vg, path, ctx.Err())
		case <-t.C:
		}
	}
}
