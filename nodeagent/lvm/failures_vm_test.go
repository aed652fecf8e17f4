package lvm_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if err := r.RemoveLV(ctx, failVG, "thick"); err != nil {
		t.Fatalf("removing the LV once closed: %v", err)
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
