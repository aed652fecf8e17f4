package csivm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
)

const mib = 1 << 20

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// setupNode makes the guest's first two disks into VG "thick" and VG "thin" with a 1.5 GiB pool, and returns the
// lvmd.yaml for them (spare 0, so small disks have capacity).
func setupNode(t *testing.T) *lvmd.Config {
	disks, err := vm.Disks()
	if err != nil || len(disks) < 2 {
		t.Fatalf("disks %v, %v: want at least 2", disks, err)
	}
	sh(t, "pvcreate", "-y", disks[0], disks[1])
	sh(t, "vgcreate", "thick", disks[0])
	sh(t, "vgcreate", "thin", disks[1])
	sh(t, "lvcreate", "-y", "--type", "thin-pool", "-L", "1536M", "-n", "pool", "thin")
	zero := uint64(0)
	return &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{
		{Name: "thick", VolumeGroup: "thick", Default: true, SpareGB: &zero},
		{Name: "thin", VolumeGroup: "thin", Type: lvmd.TypeThin, ThinPool: &lvmd.ThinPoolConfig{Name: "pool", OverprovisionRatio: 5}},
	}}
}

func vmOptions() vm.Options {
	return vm.Options{Disks: []vm.Disk{{Size: 2 << 30}, {Size: 2 << 30}}, MemoryMiB: 2048}
}

func mountCap(fs string) *csi.VolumeCapability {
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
}

func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
}

func fsSize(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks) * st.Bsize
}

func data(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readBack(t *testing.T, path string, want []byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(want))
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: data differs from what was written", path)
	}
}

// TestVMCSIDriver publishes xfs, ext4 and block volumes on real LVs, writes data, grows them online,
// snapshots and restores a thin volume and reads the data back, then unpublishes and deletes everything.
func TestVMCSIDriver(t *testing.T) {
	if !vm.InGuest() {
		t.Parallel() // one VM of one vCPU each: two at once use both host cores
		vm.Run(t, vmOptions())
		return
	}
	cfg := setupNode(t)
	names := driver.New(false)
	d := csidriver.StartFake(t, csidriver.FakeOptions{Names: names, Node: "vm", Runner: lvm.Runner{}, Config: cfg})
	ctl, node := d.Controller, d.Nodes[0].Service
	ctx := context.Background()
	dir := t.TempDir()

	create := func(name, dc string, size int64, c *csi.VolumeCapability, src *csi.VolumeContentSource) string {
		t.Helper()
		resp, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{c},
			CapacityRange: &csi.CapacityRange{RequiredBytes: size}, Parameters: map[string]string{names.DeviceClassParam(): dc},
			VolumeContentSource: src})
		if err != nil {
			t.Fatalf("CreateVolume %s: %v", name, err)
		}
		return resp.GetVolume().GetVolumeId()
	}
	publish := func(id, target string, c *csi.VolumeCapability) {
		t.Helper()
		if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: c}); err != nil {
			t.Fatalf("NodePublishVolume %s: %v", id, err)
		}
	}
	expand := func(id, target string, size int64, c *csi.VolumeCapability) {
		t.Helper()
		resp, err := ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: c})
		if err != nil || resp.GetCapacityBytes() < size {
			t.Fatalf("ControllerExpandVolume %s: %v, %v", id, resp, err)
		}
		if _, err := node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target, VolumeCapability: c}); err != nil {
			t.Fatalf("NodeExpandVolume %s: %v", id, err)
		}
	}
	cleanup := func(id, target string) {
		t.Helper()
		if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatalf("NodeUnpublishVolume %s: %v", id, err)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("target %s still exists after unpublish: %v", target, err)
		}
		if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatalf("DeleteVolume %s: %v", id, err)
		}
	}

	for _, fs := range []string{"xfs", "ext4"} {
		t.Run(fs, func(t *testing.T) {
			c := mountCap(fs)
			id := create("pvc-"+fs, "thick", 400*mib, c, nil)
			target := filepath.Join(dir, fs)
			publish(id, target, c)
			if got := sh(t, "findmnt", "-n", "-o", "FSTYPE", target); strings.TrimSpace(got) != fs {
				t.Fatalf("%s is mounted as %q", target, got)
			}
			payload := data(1, 8*mib)
			writeFile(t, filepath.Join(target, "data"), payload)
			before := fsSize(t, target)
			expand(id, target, 800*mib, c)
			if after := fsSize(t, target); after <= before {
				t.Errorf("file system is %d bytes after growing the volume, was %d", after, before)
			}
			readBack(t, filepath.Join(target, "data"), payload)
			cleanup(id, target)
		})
	}

	t.Run("block", func(t *testing.T) {
		c := blockCap()
		id := create("pvc-block", "thick", 64*mib, c, nil)
		target := filepath.Join(dir, "block")
		publish(id, target, c)
		payload := data(2, 4*mib)
		writeFile(t, target, payload)
		readBack(t, filepath.Join("/dev/thick", id), payload)
		cleanup(id, target)
	})

	t.Run("thin snapshot and restore", func(t *testing.T) {
		c := mountCap("xfs")
		id := create("pvc-origin", "thin", 512*mib, c, nil)
		target := filepath.Join(dir, "origin")
		publish(id, target, c)
		first, second := data(3, 4*mib), data(4, 4*mib)
		writeFile(t, filepath.Join(target, "data"), first)
		snap, err := ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: id})
		if err != nil {
			t.Fatalf("CreateSnapshot: %v", err)
		}
		writeFile(t, filepath.Join(target, "data"), second)
		restored := create("pvc-restore", "thin", 512*mib, c,
			&csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}})
		rtarget := filepath.Join(dir, "restore")
		publish(restored, rtarget, c)
		readBack(t, filepath.Join(rtarget, "data"), first)
		readBack(t, filepath.Join(target, "data"), second)
		cleanup(restored, rtarget)
		if _, err := ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId()}); err != nil {
			t.Fatal(err)
		}
		cleanup(id, target)
	})

	if out := sh(t, "lvs", "--noheadings", "-o", "lv_name", "thick"); strings.TrimSpace(out) != "" {
		t.Errorf("LVs left in VG thick: %s", out)
	}
	if out := sh(t, "lvs", "--noheadings", "-o", "lv_name", "thin"); strings.TrimSpace(out) != "pool" {
		t.Errorf("LVs left in VG thin besides the pool: %s", out)
	}
}
