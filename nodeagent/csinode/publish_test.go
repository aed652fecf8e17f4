package csinode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

// TestNode_PublishFilesystem_MountFlags: only "rw" on a read-only publication is refused; "rw" on a writable
// one and any other flag on a read-only one are passed to the mount.
func TestNode_PublishFilesystem_MountFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flag     string
		readonly bool
		want     []string
	}{
		{"rw on a writable publication", "rw", false, []string{"rw"}},
		{"noatime on a read-only publication", "noatime", true, []string{"ro", "noatime"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, driver.New(false))
			if _, err := f.exec.Command("mkfs.ext4", "/dev/vg1/"+f.volume).CombinedOutput(); err != nil { // a read-only volume is not formatted
				t.Fatal(err)
			}
			target := filepath.Join(f.dir, "target")
			req := &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: mountCap("ext4", tc.flag), Readonly: tc.readonly}
			if _, err := f.node.NodePublishVolume(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			mp, ok := f.mountOf(target)
			for _, o := range tc.want {
				if !ok || !slices.Contains(mp.Opts, o) {
					t.Errorf("mount %+v (mounted %v), want option %s", mp, ok, o)
				}
			}
		})
	}
}

// TestNode_PublishBlock_LeavesNoFileOpen: creating a block publication's target file closes it; an agent
// publishing many block volumes does not run out of file descriptors.
func TestNode_PublishBlock_LeavesNoFileOpen(t *testing.T) {
	f := newFixture(t, driver.New(false))
	c := blockCap()
	publish := func(i int) {
		t.Helper()
		target := filepath.Join(f.dir, fmt.Sprintf("dev-%d", i))
		if _, err := f.node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: c}); err != nil {
			t.Fatal(err)
		}
	}
	publish(0) // anything opened once (the fake API client, ...) is open before counting
	before := openFiles(t)
	const n = 50
	for i := 1; i <= n; i++ {
		publish(i)
	}
	if after := openFiles(t); after-before >= n/2 {
		t.Errorf("%d files open after %d block publications, %d before: the target files are left open", after, n, before)
	}
}

func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestNode_VolumeStats_AreTheFileSystems: the bytes and inodes reported are statfs(2)'s for the volume's path —
// total, used (total less free) and available, bytes in fragment-size units.
func TestNode_VolumeStats_AreTheFileSystems(t *testing.T) {
	f := newFixture(t, driver.New(false))
	target := filepath.Join(f.dir, "t")
	if _, err := f.node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: mountCap("ext4")}); err != nil {
		t.Fatal(err)
	}
	stats, err := f.node.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: f.volume, VolumePath: target})
	if err != nil || len(stats.GetUsage()) != 2 {
		t.Fatalf("stats %v, %v", stats, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		t.Fatal(err)
	}
	bs := st.Frsize
	// Other processes write to the test's file system meanwhile: free space and inodes may move a little.
	near := func(what string, got, want, slack int64) {
		t.Helper()
		if got < want-slack || got > want+slack {
			t.Errorf("%s %d, want %d (statfs, within %d)", what, got, want, slack)
		}
	}
	bytes, inodes := stats.Usage[0], stats.Usage[1]
	if bytes.Unit != csi.VolumeUsage_BYTES || inodes.Unit != csi.VolumeUsage_INODES {
		t.Fatalf("units %v, %v: want bytes, then inodes", bytes.Unit, inodes.Unit)
	}
	near("total bytes", bytes.Total, int64(st.Blocks)*bs, 0)
	near("used bytes", bytes.Used, int64(st.Blocks-st.Bfree)*bs, 64<<20)
	near("available bytes", bytes.Available, int64(st.Bavail)*bs, 64<<20)
	near("total inodes", inodes.Total, int64(st.Files), 0)
	near("used inodes", inodes.Used, int64(st.Files-st.Ffree), 1000)
	near("available inodes", inodes.Available, int64(st.Ffree), 1000)
}

// TestNode_Expand_CapacityRange: a negative size, or a required size above a set limit, is refused as
// invalid before anything is touched; sizes at their bounds (zero, required equal to the limit, no limit) are
// fine.
func TestNode_Expand_CapacityRange(t *testing.T) {
	f := newFixture(t, driver.New(false))
	target := filepath.Join(f.dir, "t")
	if _, err := f.node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: mountCap("ext4")}); err != nil {
		t.Fatal(err)
	}
	const gib = 1 << 30
	for _, tc := range []struct {
		required, limit int64
		valid           bool
	}{
		{-1, 0, false}, {0, -1, false}, {2 * gib, gib, false},
		{0, 0, true}, {gib, gib, true}, {2 * gib, 0, true}, {0, gib, true}, {gib, 2 * gib, true},
	} {
		_, err := f.node.NodeExpandVolume(context.Background(), &csi.NodeExpandVolumeRequest{VolumeId: f.volume, VolumePath: target,
			CapacityRange: &csi.CapacityRange{RequiredBytes: tc.required, LimitBytes: tc.limit}})
		if tc.valid && err != nil {
			t.Errorf("required %d, limit %d: %v, want the file system grown", tc.required, tc.limit, err)
		}
		if !tc.valid && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "invalid capacity range")) {
			t.Errorf("required %d, limit %d: %v, want InvalidArgument naming the capacity range", tc.required, tc.limit, err)
		}
	}
}

// TestNode_Expand_PublishedBlockVolume_GrowsNothing: expanding at a block publication (a device file, not a
// directory) succeeds without running a file system resizer on the raw device, even one holding a file system.
func TestNode_Expand_PublishedBlockVolume_GrowsNothing(t *testing.T) {
	f := newFixture(t, driver.New(false))
	target := filepath.Join(f.dir, "dev")
	c := blockCap()
	if _, err := f.node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: c}); err != nil {
		t.Fatal(err)
	}
	device := "/dev/vg1/" + f.volume
	// The pod put a file system on its raw device: it is the pod's, never grown by the node.
	if _, err := f.exec.Command("mkfs.ext4", device).CombinedOutput(); err != nil {
		t.Fatal(err)
	}
	grows := f.exec.Device(device).Grows
	// Without the capability (kubelet may leave it out), the path tells it is a block publication.
	if _, err := f.node.NodeExpandVolume(context.Background(), &csi.NodeExpandVolumeRequest{VolumeId: f.volume, VolumePath: target}); err != nil {
		t.Fatal(err)
	}
	if d := f.exec.Device(device); d.Grows != grows {
		t.Errorf("device %+v after expanding a block publication, want no resizer run on it (%d grows before)", d, grows)
	}
}
