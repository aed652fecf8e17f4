package lvm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvm/lvmtest"
)

// failuresFile holds lvm2's real failures, recorded in the VM lane by TestVMRecordFailures and replayed by
// TestReplay_Failures, so error handling is tested against lvm2's own words rather than strings typed here.
// Refresh it with LVMS_UPDATE_RECORDINGS=1 make test-vm VM_RUN=TestVMRecordFailures VM_PKGS=./nodeagent/lvm.
var failuresFile = filepath.Join("testdata", "vm-failures.json")

const failVG = "failvg"

// failureScript runs each failure through the Runner's own methods and checks how it is classified. In
// the guest it also sets the stage (a volume group, an open LV, a full thin pool) with plain commands that
// are not recorded; on the host the replay answers as lvm2 did.
func failureScript(t *testing.T, r lvm.Runner, disk string) {
	ctx := context.Background()
	stage := func(name string, args ...string) {
		t.Helper()
		if !vm.InGuest() {
			return
		}
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
	}
	stage("pvcreate", "-y", disk)
	stage("vgcreate", failVG, disk)
	// errorwhenfull: a full pool fails writes at once instead of queueing them for 60 s.
	stage("lvcreate", "-y", "--type", "thin-pool", "-L", "8M", "-n", "pool", failVG)
	stage("lvchange", "--errorwhenfull", "y", failVG+"/pool")

	expect := func(what string, err error, notFound bool, words string) {
		t.Helper()
		ce, ok := lvm.AsCommandError(err)
		switch {
		case !ok:
			t.Errorf("%s: %v, want lvm2's failure as a CommandError", what, err)
		case lvm.IsNotFound(err) != notFound:
			t.Errorf("%s: IsNotFound = %v, want %v for lvm2's %q", what, !notFound, notFound, ce.Stderr)
		case !strings.Contains(err.Error(), words):
			t.Errorf("%s: error %q does not carry lvm2's words %q", what, err, words)
		default:
			t.Logf("%s: %v", what, err)
		}
	}
	expect("removing an LV of a volume group that is gone", r.RemoveLV(ctx, "novg", "lv"), true, `Volume group "novg" not found`)
	expect("removing an LV that is gone", r.RemoveLV(ctx, failVG, "nolv"), true, `Failed to find logical volume "failvg/nolv"`)
	expect("removing a volume group that is gone", r.VGRemove(ctx, "novg"), true, `Volume group "novg" not found`)

	if err := r.CreateLV(ctx, failVG, "thick", 4<<20); err != nil {
		t.Fatal(err)
	}
	expect("creating an LV that exists", r.CreateLV(ctx, failVG, "thick", 4<<20), false, "already exists")
	expect("creating an LV larger than the free space", r.CreateLV(ctx, failVG, "huge", 1<<40), false, "Volume group \"failvg\" has insufficient free space")

	// An LV held open (a mounted filesystem, a VM's disk) cannot be removed.
	if vm.InGuest() {
		f, err := os.Open("/dev/" + failVG + "/thick")
		if err != nil {
			t.Fatal(err)
		}
		expect("removing an LV in use", r.RemoveLV(ctx, failVG, "thick"), false, "Logical volume failvg/thick in use")
		f.Close()
	} else {
		expect("removing an LV in use", r.RemoveLV(ctx, failVG, "thick"), false, "Logical volume failvg/thick in use")
	}

	// lvm2 waits for a volume group lock held by someone else (another lvm2 command, a hung one) for as
	// long as it is held; only the runner's per-command timeout ends the wait.
	locked := r
	locked.Timeout = lockTimeout
	var err error
	if waited := holdingLVMLock(t, failVG, func() { err = locked.RemoveLV(ctx, failVG, "thick") }); !waited {
		t.Errorf("lvremove never waited on the lock of %s (no blocked flock in /proc/locks)", failVG)
	}
	if te, ok := lvm.AsTimeout(err); !ok || te.Command != "lvm lvremove -y failvg/thick" || te.After != lockTimeout {
		t.Errorf("removing an LV while lvm2's VG lock is held: %v, want a *TimeoutError for lvm lvremove after %s", err, lockTimeout)
	} else {
		t.Logf("removing an LV while lvm2's VG lock is held: %v", err)
	}
	// Killed while it waited, lvremove changed nothing.
	rep, err := r.FullReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rep.LV(failVG, "thick"); !ok {
		t.Errorf("the LV is gone after a lvremove killed while waiting on the lock: %+v", rep.LVsOf(failVG))
	}
	// The same command, closed and unlocked, succeeds.
	if err := r.RemoveLV(ctx, failVG, "thick"); err != nil {
		t.Fatalf("removing the LV once closed and unlocked: %v", err)
	}
	expect("removing a volume group that holds LVs without force", r.VGRemove(ctx, failVG), false, `Volume group "failvg" not removed`)

	// Fill the thin pool past its data space: lvm2 then refuses new thin volumes.
	if err := r.CreateThinLV(ctx, failVG, "pool", "thin", 32<<20); err != nil {
		t.Fatal(err)
	}
	if vm.InGuest() {
		// Fails with ENOSPC once the pool is full; what matters is the pool's state afterwards.
		_ = exec.Command("dd", "if=/dev/urandom", "of=/dev/"+failVG+"/thin", "bs=1M", "count=16", "oflag=direct").Run()
	}
	expect("creating a thin volume in a full pool", r.CreateThinLV(ctx, failVG, "pool", "thin2", 4<<20), false, "free space in thin pool failvg/pool reached threshold")
}

// lockTimeout is the per-command timeout while the VG lock is held: far above what lvremove needs under
// software emulation, so it is the lock that holds lvm2 up.
const lockTimeout = 5 * time.Second

// holdingLVMLock runs fn while holding lvm2's own lock of vg (lvm2's file locking: an exclusive flock on
// <locking_dir>/V_<vg>, as a running lvm2 command holds it) and reports whether some process waited on it
// meanwhile. On the host it only runs fn: the replay answers as lvm2 did.
func holdingLVMLock(t *testing.T, vg string, fn func()) (waited bool) {
	t.Helper()
	if !vm.InGuest() {
		fn()
		return true
	}
	// lvm.DefaultLockDir is lvm2's locking_dir as Debian builds it.
	if err := os.MkdirAll(lvm.DefaultLockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(lvm.DefaultLockDir, "V_"+vg)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	// Closing releases the lock, also when fn fails the test; removing it first is what lvm2 does with
	// its lock files.
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("lock %s: %v", path, err)
	}
	defer os.Remove(path)
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	// A process blocked on the lock shows in /proc/locks as "-> FLOCK ... <maj>:<min>:<inode> ...".
	inode := fmt.Sprintf(":%d ", st.Ino)
	var seen atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go func() {
		for tick := time.NewTicker(20 * time.Millisecond); ; {
			select {
			case <-done:
				tick.Stop()
				return
			case <-tick.C:
			}
			data, _ := os.ReadFile("/proc/locks")
			for _, l := range strings.Split(string(data), "\n") {
				if strings.Contains(l, "->") && strings.Contains(l, inode) {
					seen.Store(true)
				}
			}
		}
	}()
	fn()
	return seen.Load()
}

// TestVMRecordFailures makes lvm2 fail in every way the node agent handles, on a real kernel, and records it.
func TestVMRecordFailures(t *testing.T) {
	if vm.InGuest() {
		disks, err := vm.Disks()
		if err != nil {
			t.Fatal(err)
		}
		rec := lvm.NewRecorder(lvm.OSExecutor{}, vm.RecordingSource(t.Name()))
		failureScript(t, lvm.Runner{Exec: rec}, disks[0])
		data, err := json.Marshal(rec.Session())
		if err != nil {
			t.Fatal(err)
		}
		vm.WriteTransfer(t, disks[1], data)
		return
	}
	out := filepath.Join(t.TempDir(), "transfer.img")
	vm.Run(t, vm.Options{Disks: []vm.Disk{{Size: 256 << 20}, {Path: out, Size: 4 << 20}}, Timeout: 10 * time.Minute})
	if t.Failed() || t.Skipped() {
		return
	}
	var s lvm.Session
	if err := json.Unmarshal(vm.ReadTransfer(t, out), &s); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("LVMS_UPDATE_RECORDINGS") == "1" {
		if err := s.Save(failuresFile); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %d lvm2 commands into %s", len(s.Commands), failuresFile)
	}
}

// TestReplay_Failures replays lvm2's recorded failures on any host.
func TestReplay_Failures(t *testing.T) {
	rp := lvmtest.Replay(t, failuresFile, "record it with LVMS_UPDATE_RECORDINGS=1 make test-vm VM_RUN=TestVMRecordFailures VM_PKGS=./nodeagent/lvm")
	t.Logf("replaying %s", rp)
	failureScript(t, lvm.Runner{Exec: rp}, "")
}
