package vm_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/blockdev/blockdevtest"
)

// TestVMLocalLVM proves device-mapper in the lane with one boot: a thin pool, a thin LV with xfs, a thin
// snapshot that keeps the data of the moment it was taken while the origin changes, online growth; a
// thick LV with ext4 whose data survives a remount and an online extend; and the agent's reading of /sys
// agreeing with lsblk on all of these device-mapper devices.
func TestVMLocalLVM(t *testing.T) {
	if vm.InGuest() {
		disk := guestDisks(t, 1)[0]
		sh(t, "pvcreate", disk)
		sh(t, "vgcreate", "vg0", disk)
		t.Run("thin", testThinSnapshotXFS)
		t.Run("thick", testThickExt4)
		t.Run("discovery", testDiscoveryMatchesLsblk)
		return
	}
	vm.Run(t, vm.Options{Disks: []vm.Disk{{Size: 2 << 30}}})
}

// testThinSnapshotXFS runs in the guest on VG vg0.
func testThinSnapshotXFS(t *testing.T) {
	sh(t, "lvcreate", "-y", "--type", "thin-pool", "-L", "512M", "-n", "pool", "vg0")
	sh(t, "lvcreate", "-y", "--thin", "-V", "1G", "-n", "thin1", "vg0/pool")
	sh(t, "mkfs.xfs", "-q", "/dev/vg0/thin1")
	dir := mount(t, "/dev/vg0/thin1")

	before := randomData(1, 4<<20)
	after := randomData(2, 4<<20)
	file := filepath.Join(dir, "data")
	writeSynced(t, file, before)

	// A thin snapshot of the mounted file system (lvcreate suspends the LV, which freezes xfs).
	sh(t, "lvcreate", "-s", "-n", "snap1", "vg0/thin1")
	lv := lvReport(t, "vg0/snap1")
	if lv.Origin != "thin1" || lv.PoolLV != "pool" || lv.Attr[0] != 'V' {
		t.Fatalf("snap1 = %+v, want a thin volume (attr V...) in pool with origin thin1", lv)
	}
	writeSynced(t, file, after)

	// Thin snapshots skip activation by default: -K activates it anyway. Same xfs UUID as the origin.
	sh(t, "lvchange", "-ay", "-K", "vg0/snap1")
	snap := mount(t, "/dev/vg0/snap1", "ro", "nouuid")
	assertFile(t, filepath.Join(snap, "data"), before)
	assertFile(t, file, after)

	grown := fsSize(t, dir)
	sh(t, "lvextend", "-L", "1536M", "vg0/thin1")
	sh(t, "xfs_growfs", dir)
	if got := fsSize(t, dir); got <= grown {
		t.Fatalf("xfs on thin1 is %d bytes after lvextend and xfs_growfs, was %d", got, grown)
	}
	assertFile(t, file, after)
}

// testThickExt4 runs in the guest on VG vg0.
func testThickExt4(t *testing.T) {
	sh(t, "lvcreate", "-y", "-L", "256M", "-n", "thick", "vg0")
	if lv := lvReport(t, "vg0/thick"); lv.Attr[0] != '-' || lv.Size != "268435456B" {
		t.Fatalf("thick = %+v, want a linear LV (attr -...) of 268435456B", lv)
	}
	sh(t, "mkfs.ext4", "-q", "/dev/vg0/thick")
	dir := mount(t, "/dev/vg0/thick")
	data := randomData(3, 8<<20)
	file := filepath.Join(dir, "data")
	writeSynced(t, file, data)
	sh(t, "umount", dir)
	sh(t, "mount", "/dev/vg0/thick", dir)
	assertFile(t, file, data)

	size := fsSize(t, dir)
	sh(t, "lvextend", "-r", "-L", "384M", "vg0/thick") // -r: resize2fs online
	if got := fsSize(t, dir); got <= size {
		t.Fatalf("ext4 on thick is %d bytes after lvextend -r, was %d", got, size)
	}
	assertFile(t, file, data)
}

// testDiscoveryMatchesLsblk runs in the guest after the others: the node agent's device list from /sys
// (blockdev.ReadSysfs) must equal lsblk's for every device of the guest — the LVs, the thin pool's hidden
// parts, the snapshot, a suspended LV — as it does on the host for loop devices and partitions.
func testDiscoveryMatchesLsblk(t *testing.T) {
	sh(t, "lvcreate", "-y", "-L", "8M", "-n", "suspended", "vg0")
	sh(t, "dmsetup", "suspend", "vg0-suspended")
	t.Cleanup(func() { sh(t, "dmsetup", "resume", "vg0-suspended") })
	devs := blockdevtest.MatchLsblk(t, func(string) bool { return true })
	var lvs int
	for _, d := range devs {
		if d.Type == blockdev.TypeLVM {
			lvs++
		}
	}
	if lvs < 5 {
		t.Errorf("found %d LVs of type lvm, want the pool's parts, thin1, snap1, thick and suspended", lvs)
	}
	if d := findByName(devs, "/dev/mapper/vg0-suspended"); d.State != "suspended" {
		t.Errorf("vg0-suspended: state %q, want suspended (%+v)", d.State, d)
	}
}

// findByName returns the device whose lsblk NAME is name.
func findByName(devs map[string]blockdev.Device, name string) blockdev.Device {
	for _, d := range devs {
		if d.Name == name {
			return d
		}
	}
	return blockdev.Device{}
}

// lvInfo is one row of `lvs --reportformat json`.
type lvInfo struct {
	Name   string `json:"lv_name"`
	Attr   string `json:"lv_attr"`
	Size   string `json:"lv_size"`
	PoolLV string `json:"pool_lv"`
	Origin string `json:"origin"`
}

// lvReport reports one LV.
func lvReport(t *testing.T, lv string) lvInfo {
	t.Helper()
	out := sh(t, "lvs", "--reportformat", "json", "--units", "b", "-o", "lv_name,lv_attr,lv_size,pool_lv,origin", lv)
	var r struct {
		Report []struct {
			LV []lvInfo `json:"lv"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("parse lvs output %q: %v", out, err)
	}
	if len(r.Report) != 1 || len(r.Report[0].LV) != 1 {
		t.Fatalf("lvs %s: want one LV, got %s", lv, out)
	}
	return r.Report[0].LV[0]
}
