package vm_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/e2e/vm"
)

// TestVMSharedLock proves the shared-VG path with two VMs on one shared LUN, each running sanlock and
// lvmlockd with its own host id: A creates the shared VG and an inactive LV and activates it exclusively;
// B joins the lockspace and its exclusive activation is refused while A holds the LV, then succeeds (and
// the LV is usable) once A deactivates it.
func TestVMSharedLock(t *testing.T) {
	if vm.InGuest() {
		sharedLockGuest(t)
		return
	}
	lun := filepath.Join(t.TempDir(), "lun0.img")
	disk := vm.Disk{Path: lun, Size: 1 << 30}
	vm.RunMany(t, []vm.Options{
		{Name: "a", Disks: []vm.Disk{disk}},
		{Name: "b", Disks: []vm.Disk{disk}},
	})
}

const (
	sharedVG = "vgshared"
	sharedLV = sharedVG + "/lv0"
	lvDevice = "/dev/mapper/" + sharedVG + "-lv0"
)

func sharedLockGuest(t *testing.T) {
	lun := guestDisks(t, 1)[0]
	switch vm.Role() {
	case "a":
		vm.StartLockDaemons(t, 1)
		sh(t, "vgcreate", "--shared", sharedVG, lun)
		sh(t, "lvcreate", "-an", "-L", "64M", "-n", "lv0", sharedVG)
		vm.Signal(t, "vg-ready")

		sh(t, "lvchange", "-aey", sharedLV)
		assertActive(t, true)
		vm.Signal(t, "a-holds")

		vm.WaitSignal(t, "b-refused")
		sh(t, "lvchange", "-an", sharedLV)
		assertActive(t, false)
		vm.Signal(t, "a-released")
		vm.WaitSignal(t, "b-done")
	case "b":
		vm.StartLockDaemons(t, 2)
		vm.WaitSignal(t, "vg-ready")
		lockStart(t, sharedVG)

		vm.WaitSignal(t, "a-holds")
		code, out := shCode(t, "lvchange", "-aey", sharedLV)
		t.Logf("lvchange -aey while A holds the LV: exit code %d: %s", code, strings.TrimSpace(out))
		if code != 5 || !strings.Contains(out, "LV locked by other host") {
			t.Fatalf("lvchange -aey %s while A holds it: got exit code %d and %q, want exit code 5 and \"LV locked by other host\"", sharedLV, code, out)
		}
		assertActive(t, false)
		vm.Signal(t, "b-refused")

		vm.WaitSignal(t, "a-released")
		sh(t, "lvchange", "-aey", sharedLV)
		assertActive(t, true)
		data := randomData(4, 1<<20)
		writeSynced(t, lvDevice, data)
		sh(t, "blockdev", "--flushbufs", lvDevice)
		got, err := os.ReadFile(lvDevice)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < len(data) || !bytes.Equal(got[:len(data)], data) {
			t.Fatalf("%s: data read back differs from data written", lvDevice)
		}
		sh(t, "lvchange", "-an", sharedLV)
		vm.Signal(t, "b-done")
	default:
		t.Fatalf("unknown role %q", vm.Role())
	}
}

// lockStart joins the VG's lockspace; the first attempts often fail while sanlock acquires the host id.
func lockStart(t *testing.T, vg string) {
	t.Helper()
	var out string
	for attempt := 1; attempt <= 20; attempt++ {
		var code int
		code, out = shCode(t, "vgchange", "--lockstart", vg)
		if code == 0 { // by default vgchange waits until the lockspace is joined
			return
		}
		t.Logf("vgchange --lockstart %s, attempt %d: exit code %d: %s", vg, attempt, code, strings.TrimSpace(out))
		time.Sleep(3 * time.Second)
	}
	t.Fatalf("vgchange --lockstart %s kept failing: %s", vg, out)
}

// assertActive checks whether the shared LV is active on this VM (its device-mapper device exists).
func assertActive(t *testing.T, want bool) {
	t.Helper()
	_, err := os.Stat(lvDevice)
	if got := err == nil; got != want {
		t.Fatalf("%s active here: %v, want %v (stat: %v)", sharedLV, got, want, err)
	}
}
