package csivm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// recordSize is one record of the writer: an O_DIRECT block.
const recordSize = 4096

var recordMagic = []byte("LVMSGRP1")

// groupHelperEnv makes the test binary, started again by TestVMGroupSnapshot, play an agent killed between
// suspend and resume: its value is the state directory.
const groupHelperEnv = "LVMS_GROUPSNAP_HELPER"

// groupMarkerEnv names the file the helper creates when it blocks where it is to be killed.
const groupMarkerEnv = "LVMS_GROUPSNAP_MARKER"

// TestVMGroupSnapshot proves group snapshots on a real kernel. A writer appends sequence-numbered 4 KiB
// records with O_DIRECT|O_SYNC, strictly alternating between two thin volumes ("data" and "log"), so at
// most one write is in flight. The group is snapshotted while it writes, each snapshot is restored as a
// single snapshot is (a writable thin snapshot of it), and the last record of each restored volume is
// read: they differ by at most 1, the writer's in-flight window. Snapshots taken one after the other
// (the control) differ by far more, so the check can fail. A group with a thick volume, or with volumes
// of two volume groups, is refused with nothing suspended. An agent killed with both origins suspended
// leaves them suspended (one snapshot's thin device replaced, the other's deleted and not yet replaced);
// Recover, as at the agent's restart, resumes them, removes the group's snapshots, and the origins take
// writes again and the pool new volumes.
func TestVMGroupSnapshot(t *testing.T) {
	if dir := os.Getenv(groupHelperEnv); dir != "" {
		killedAgent(t, dir)
		return
	}
	if !vm.InGuest() {
		t.Parallel() // one VM of one vCPU each: two at once use both host cores
		vm.Run(t, vmOptions())
		return
	}
	setupNode(t)
	for _, lv := range []string{"data", "log"} {
		sh(t, "lvcreate", "-y", "-T", "thin/pool", "-V", "128M", "-n", lv)
	}
	sh(t, "lvcreate", "-y", "-L", "64M", "-n", "vol", "thick")
	ctx := context.Background()
	runner := lvm.Runner{}
	state := t.TempDir()

	t.Run("refused before anything is suspended", func(t *testing.T) {
		eng := newEngine(t, runner, state)
		for _, tc := range []struct {
			name    string
			members []groupsnapshot.Member
			want    groupsnapshot.Reason
		}{
			{"thick volume", []groupsnapshot.Member{{VG: "thick", Origin: "vol", Snapshot: "s-vol"}}, groupsnapshot.ReasonThickVolume},
			{"two volume groups", []groupsnapshot.Member{{VG: "thin", Origin: "data", Snapshot: "s-data"}, {VG: "thick", Origin: "vol", Snapshot: "s-vol"}}, groupsnapshot.ReasonMixedVolumeGroups},
		} {
			before := lvNames(t, "thin")
			_, err := eng.Take(ctx, groupsnapshot.Request{ID: "refused", Members: tc.members})
			var re *groupsnapshot.RefusedError
			if !errors.As(err, &re) || re.Reason != tc.want {
				t.Fatalf("%s: got %v, want a refusal %s", tc.name, err, tc.want)
			}
			if s := suspendedDevices(t); len(s) > 0 {
				t.Fatalf("%s: refused, but %v suspended", tc.name, s)
			}
			if got := lvNames(t, "thin"); !slices.Equal(got, before) || slices.Contains(lvNames(t, "thick"), "s-vol") {
				t.Fatalf("%s: refused, but LVs changed: %v, were %v", tc.name, got, before)
			}
			t.Logf("%s: %v", tc.name, err)
		}
	})

	t.Run("crash-consistent under a writer", func(t *testing.T) {
		eng := newEngine(t, runner, state)
		w := startWriter(t, "/dev/thin/data", "/dev/thin/log")
		w.waitFor(t, 100)
		res, err := eng.Take(ctx, groupsnapshot.Request{ID: "db", Members: []groupsnapshot.Member{
			{VG: "thin", Origin: "log", Snapshot: "snap-log"}, {VG: "thin", Origin: "data", Snapshot: "snap-data"}}})
		if err != nil {
			t.Fatal(err)
		}
		atSnap := w.last.Load()
		w.waitFor(t, atSnap+20) // the writer goes on after the resume
		// The control: single snapshots one after the other, while the writer runs.
		if err := runner.CreateThinSnapshot(ctx, "thin", "data", "single-data", nil); err != nil {
			t.Fatal(err)
		}
		w.waitFor(t, w.last.Load()+10)
		if err := runner.CreateThinSnapshot(ctx, "thin", "log", "single-log", nil); err != nil {
			t.Fatal(err)
		}
		w.stop(t)
		if s := suspendedDevices(t); len(s) > 0 {
			t.Fatalf("after the group snapshot %v are still suspended", s)
		}
		data, log := restoreAndRead(t, runner, "snap-data"), restoreAndRead(t, runner, "snap-log")
		t.Logf("group: last record data %d, log %d (writer at %d when Take returned); origins suspended for %s",
			data, log, atSnap, res.Suspended)
		if data < 100 || log < 100 {
			t.Errorf("the restored volumes end at records %d and %d: the snapshot did not catch the running writer", data, log)
		}
		if d := absDiff(data, log); d > 1 {
			t.Errorf("restored group: data's last record %d and log's %d are %d apart; the writer had at most 1 write in flight, so a consistent group is at most 1 apart", data, log, d)
		}
		if res.Suspended <= 0 || res.Suspended >= groupsnapshot.DefaultMaxSuspend {
			t.Errorf("suspend time %s: want above 0 and below %s", res.Suspended, groupsnapshot.DefaultMaxSuspend)
		}
		sd, sl := restoreAndRead(t, runner, "single-data"), restoreAndRead(t, runner, "single-log")
		t.Logf("control (one snapshot after the other): data %d, log %d, %d apart", sd, sl, absDiff(sd, sl))
		if absDiff(sd, sl) <= 1 {
			t.Errorf("control: snapshots taken one after the other are %d apart, so this test could not tell a consistent group from an inconsistent one", absDiff(sd, sl))
		}
		for _, s := range []string{"snap-data", "snap-log"} {
			if attr := strings.TrimSpace(sh(t, "lvs", "--noheadings", "-o", "lv_attr,origin,lv_tags", "thin/"+s)); attr[1] != 'r' || !strings.Contains(attr, groupsnapshot.GroupTag("db")) {
				t.Errorf("snapshot %s: %q, want read-only with the group's tag", s, attr)
			}
		}
	})

	t.Run("suspend deadline", func(t *testing.T) {
		// A limit no real suspend meets: the group is abandoned mid-way (a dmsetup killed at the deadline),
		// every origin resumed, its snapshots removed, and the pool still takes new volumes.
		eng, err := groupsnapshot.New(groupsnapshot.Options{Runner: runner, StateDir: state, MaxSuspend: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		before := lvNames(t, "thin")
		_, err = eng.Take(ctx, groupsnapshot.Request{ID: "late", Members: []groupsnapshot.Member{
			{VG: "thin", Origin: "data", Snapshot: "late-data"}, {VG: "thin", Origin: "log", Snapshot: "late-log"}}})
		var de *groupsnapshot.DeadlineError
		if !errors.As(err, &de) {
			t.Fatalf("got %v, want a deadline error", err)
		}
		t.Logf("abandoned: %v", err)
		if s := suspendedDevices(t); len(s) > 0 {
			t.Fatalf("after the deadline %v are still suspended", s)
		}
		if got := lvNames(t, "thin"); !slices.Equal(got, before) {
			t.Fatalf("LVs after the deadline: %v, before: %v", got, before)
		}
		sh(t, "lvcreate", "-y", "-T", "thin/pool", "-V", "16M", "-n", "after-deadline")
	})

	t.Run("agent killed while suspended, then restarted", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run", "^TestVMGroupSnapshot$", "-test.v")
		marker := filepath.Join(t.TempDir(), "blocked")
		cmd.Env = append(os.Environ(), groupHelperEnv+"="+dir, groupMarkerEnv+"="+marker)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Minute)
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("the helper never reached its last create_snap: %s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		left := suspendedDevices(t)
		t.Logf("killed with %v suspended; helper said: %s", left, strings.TrimSpace(out.String()))
		if !slices.Equal(left, []string{"thin-data", "thin-log"}) {
			t.Fatalf("the killed helper left %v suspended, want thin-data and thin-log (else the test proves nothing)", left)
		}
		// lvm2 commands on the node do not hang on suspended LVs: they do not scan LVs (scan_lvs=0, and the
		// agent's devices file lists only its PVs).
		c, cancel := context.WithTimeout(ctx, time.Minute)
		out2, err := exec.CommandContext(c, "lvs", "thick", "thin").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("lvs with thin/data and thin/log suspended: %v: %s", err, out2)
		}
		eng := newEngine(t, runner, dir)
		if err := eng.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		if s := suspendedDevices(t); len(s) > 0 {
			t.Fatalf("after Recover %v are still suspended", s)
		}
		for _, s := range []string{"kill-data", "kill-log"} {
			if slices.Contains(lvNames(t, "thin"), s) {
				t.Errorf("after Recover the killed group's snapshot %s is still there", s)
			}
		}
		for _, o := range []string{"data", "log"} {
			if !slices.Contains(lvNames(t, "thin"), o) {
				t.Fatalf("origin %s is gone", o)
			}
		}
		w := startWriter(t, "/dev/thin/data", "/dev/thin/log")
		w.waitFor(t, 10)
		w.stop(t)
		sh(t, "lvcreate", "-y", "-T", "thin/pool", "-V", "16M", "-n", "after-recover")
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("state files left after Recover: %v", entries)
		}
	})
}

// killedAgent runs a group snapshot whose last create_snap message never returns, until the test kills it.
func killedAgent(t *testing.T, dir string) {
	hang := &hangingExec{}
	eng, err := groupsnapshot.New(groupsnapshot.Options{Runner: lvm.Runner{Exec: hang}, StateDir: dir, MaxSuspend: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.Take(context.Background(), groupsnapshot.Request{ID: "killed", Members: []groupsnapshot.Member{
		{VG: "thin", Origin: "data", Snapshot: "kill-data"}, {VG: "thin", Origin: "log", Snapshot: "kill-log"}}})
	t.Fatalf("the helper's group returned (%v); it should have been killed", err)
}

// hangingExec runs commands, but the second create_snap message blocks forever (the agent is killed
// there, with both origins suspended, data's snapshot replaced and log's deleted).
type hangingExec struct{ creates atomic.Int32 }

func (h *hangingExec) Execute(ctx context.Context, cmd lvm.Command) (lvm.Result, error) {
	if slices.ContainsFunc(cmd.Argv, func(a string) bool { return strings.HasPrefix(a, "create_snap ") }) && h.creates.Add(1) == 2 {
		_ = os.WriteFile(os.Getenv(groupMarkerEnv), nil, 0o600)
		time.Sleep(time.Hour) // not select{}: with every goroutine blocked the runtime would end the process itself
	}
	return lvm.OSExecutor{}.Execute(ctx, cmd)
}

func newEngine(t *testing.T, runner lvm.Runner, dir string) *groupsnapshot.Engine {
	t.Helper()
	eng, err := groupsnapshot.New(groupsnapshot.Options{Runner: runner, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// suspendedDevices lists the device-mapper devices that are suspended, sorted.
func suspendedDevices(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(sh(t, "dmsetup", "info", "-c", "--noheadings", "-o", "name,suspended", "--separator", " "), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[1] == "Suspended" {
			out = append(out, f[0])
		}
	}
	slices.Sort(out)
	return out
}

func suspendedState(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSpace(sh(t, "dmsetup", "info", "-c", "--noheadings", "-o", "suspended", name))
}

// writer appends records alternately to its devices: record seq (from 1) goes to device (seq-1)%n at
// offset ((seq-1)/n)*recordSize, each written with O_DIRECT|O_SYNC before the next starts.
type writer struct {
	last   atomic.Uint64
	cancel context.CancelFunc
	done   chan error
}

func startWriter(t *testing.T, devs ...string) *writer {
	t.Helper()
	var fds []int
	for _, d := range devs {
		fd, err := unix.Open(d, unix.O_WRONLY|unix.O_DIRECT|unix.O_SYNC, 0)
		if err != nil {
			t.Fatalf("open %s: %v", d, err)
		}
		fds = append(fds, fd)
	}
	buf, err := unix.Mmap(-1, 0, recordSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // aligned for O_DIRECT
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, done: make(chan error, 1)}
	go func() {
		defer func() {
			for _, fd := range fds {
				_ = unix.Close(fd)
			}
			_ = unix.Munmap(buf)
		}()
		for seq := uint64(1); ctx.Err() == nil; seq++ {
			copy(buf, recordMagic)
			binary.LittleEndian.PutUint64(buf[8:], seq)
			binary.LittleEndian.PutUint64(buf[16:], ^seq)
			i := int(seq-1) % len(fds)
			if _, err := unix.Pwrite(fds[i], buf, int64((seq-1)/uint64(len(fds)))*recordSize); err != nil {
				w.done <- fmt.Errorf("write record %d to %s: %w", seq, devs[i], err)
				return
			}
			w.last.Store(seq)
		}
		w.done <- nil
	}()
	t.Cleanup(cancel)
	return w
}

func (w *writer) waitFor(t *testing.T, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for w.last.Load() < seq {
		select {
		case err := <-w.done:
			t.Fatalf("the writer stopped at record %d: %v", w.last.Load(), err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer is at record %d, waiting for %d", w.last.Load(), seq)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *writer) stop(t *testing.T) {
	t.Helper()
	w.cancel()
	if err := <-w.done; err != nil {
		t.Fatal(err)
	}
}

// restoreAndRead restores snapshot thin/snap as a single snapshot's restore does (a writable thin snapshot
// of it, activated) and returns the sequence number of its last record (0 when it has none).
func restoreAndRead(t *testing.T, runner lvm.Runner, snap string) uint64 {
	t.Helper()
	ctx := context.Background()
	restored := "restored-" + snap
	if err := runner.CreateThinSnapshot(ctx, "thin", snap, restored, []string{lvm.VolumeTag}); err != nil {
		t.Fatal(err)
	}
	if err := runner.ActivateWritable(ctx, "thin", restored); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join("/dev/thin", restored))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last uint64
	r := make([]byte, recordSize)
	for off := int64(0); ; off += recordSize {
		if _, err := f.ReadAt(r, off); err != nil {
			return last // the end of the volume
		}
		seq := binary.LittleEndian.Uint64(r[8:])
		if string(r[:8]) != string(recordMagic) || binary.LittleEndian.Uint64(r[16:]) != ^seq {
			return last
		}
		if seq <= last {
			t.Fatalf("%s: record %d after record %d", restored, seq, last)
		}
		last = seq
	}
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}
