package csinode_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mountutil "k8s.io/mount-utils"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/csinode"
	"github.com/lvms-dev/lvms/nodeagent/csinode/fakeexec"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
	"github.com/lvms-dev/lvms/nodeagent/lvmsim"
)

type fixture struct {
	node    *csinode.Node
	mounter *mountutil.FakeMounter
	exec    *fakeexec.Exec
	sim     *lvmsim.LVM
	dir     string
	// volume is a thick 1 GiB volume's ID; its device is /dev/vg1/<volume>.
	volume string
	client client.Client
	lvmd   lvmdapi.Client
}

func newFixture(t testing.TB, names driver.Names) *fixture {
	t.Helper()
	return newFixtureWith(t, names, nil)
}

// newFixtureWith is newFixture with the node service's options and the volume's LogicalVolume changed by modify
// before they are used.
func newFixtureWith(t testing.TB, names driver.Names, modify func(*csinode.Options, *topolvmv1.LogicalVolume)) *fixture {
	t.Helper()
	sim := lvmsim.New()
	sim.AddVG("vg1", 10<<30)
	zero := uint64(0)
	cfg := &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{{Name: "ssd", VolumeGroup: "vg1", Default: true, SpareGB: &zero}}}
	lvmdClient, stop, err := lvmdapi.InProcess(lvmdapi.NewServer(sim.Runner(), lvmdapi.StaticConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	const id = "0b0c7f4e-1111-4a4a-9d9d-000000000001"
	if _, err := lvmdClient.CreateLV(context.Background(), &proto.CreateLVRequest{Name: id, SizeBytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", UID: id},
		Spec: topolvmv1.LogicalVolumeSpec{Name: "pvc-1", NodeName: "n1", DeviceClass: "ssd"}, Status: topolvmv1.LogicalVolumeStatus{VolumeID: id}}
	f := &fixture{mounter: mountutil.NewFakeMounter(nil), exec: fakeexec.New(), sim: sim, dir: t.TempDir(), volume: id, lvmd: lvmdClient}
	opts := csinode.Options{NodeName: "n1", Names: names, LVMD: lvmdClient, Mounter: f.mounter, Exec: f.exec}
	if modify != nil {
		modify(&opts, lv)
	}
	f.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(lv).Build()
	opts.Client = f.client
	f.node = csinode.NewNode(opts)
	return f
}

func mountCap(fs string, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs, MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
}

// blockCap is a single-node raw block volume.
func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
}

func (f *fixture) mountOf(target string) (mountutil.MountPoint, bool) {
	mps, _ := f.mounter.List()
	for _, mp := range mps {
		if mp.Path == target {
			return mp, true
		}
	}
	return mountutil.MountPoint{}, false
}

func TestNode_PublishFilesystem(t *testing.T) {
	for _, fs := range []string{"xfs", "ext4", "btrfs", ""} {
		t.Run("fs "+fs, func(t *testing.T) {
			f := newFixture(t, driver.New(false))
			ctx := context.Background()
			target := filepath.Join(f.dir, "target")
			req := &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: mountCap(fs, "noatime")}
			for range 2 { // the second publish is a no-op
				if _, err := f.node.NodePublishVolume(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			device := "/dev/vg1/" + f.volume
			want := fs
			if want == "" {
				want = "ext4"
			}
			if d := f.exec.Device(device); d.FSType != want || d.Formats != 1 {
				t.Errorf("device %+v, want %s formatted once", d, want)
			}
			mp, ok := f.mountOf(target)
			if !ok || mp.Device != device || mp.Type != want || !slices.Contains(mp.Opts, "noatime") || slices.Contains(mp.Opts, "nouuid") != (want == "xfs") {
				t.Errorf("mount %+v (mounted %v): want %s on %s with noatime, nouuid only for xfs", mp, ok, device, want)
			}
			if info, err := os.Stat(target); err != nil || info.Mode().Perm() != 0o777 || info.Mode()&os.ModeSetgid == 0 {
				t.Errorf("target mode %v (%v), want 2777", info.Mode(), err)
			}
			if _, err := f.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: f.volume, TargetPath: target}); err != nil {
				t.Fatal(err)
			}
			if _, ok := f.mountOf(target); ok {
				t.Error("still mounted after unpublish")
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Errorf("target directory left behind: %v", err)
			}
			// Publishing again mounts the existing file system without formatting it.
			if _, err := f.node.NodePublishVolume(ctx, req); err != nil {
				t.Fatal(err)
			}
			if d := f.exec.Device(device); d.Formats != 1 {
				t.Errorf("formatted %d times, want once", d.Formats)
			}
		})
	}
}

func TestNode_PublishBlock(t *testing.T) {
	f := newFixture(t, driver.New(false))
	target := filepath.Join(f.dir, "dev")
	c := blockCap()
	if _, err := f.node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: c, Readonly: true}); err != nil {
		t.Fatal(err)
	}
	mp, ok := f.mountOf(target)
	if !ok || mp.Device != "/dev/vg1/"+f.volume || !slices.Contains(mp.Opts, "bind") || !slices.Contains(mp.Opts, "ro") {
		t.Errorf("mount %+v (mounted %v), want a read-only bind mount of the LV", mp, ok)
	}
	if info, err := os.Stat(target); err != nil || !info.Mode().IsRegular() {
		t.Errorf("target %v (%v), want a regular file", info, err)
	}
	if d := f.exec.Device("/dev/vg1/" + f.volume); d.Formats != 0 {
		t.Errorf("a block volume was formatted")
	}
}

func TestNode_PublishErrors(t *testing.T) {
	f := newFixture(t, driver.New(false))
	ctx := context.Background()
	if _, err := f.exec.Command("mkfs.ext4", "/dev/vg1/"+f.volume).CombinedOutput(); err != nil { // the volume holds ext4
		t.Fatal(err)
	}
	target := filepath.Join(f.dir, "t")
	rwx := mountCap("xfs")
	rwx.AccessMode.Mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	tests := []struct {
		name string
		req  *csi.NodePublishVolumeRequest
		want codes.Code
	}{
		{"no volume ID", &csi.NodePublishVolumeRequest{TargetPath: target, VolumeCapability: mountCap("xfs")}, codes.InvalidArgument},
		{"no target", &csi.NodePublishVolumeRequest{VolumeId: f.volume, VolumeCapability: mountCap("xfs")}, codes.InvalidArgument},
		{"no capability", &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target}, codes.InvalidArgument},
		{"multi-node access", &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: rwx}, codes.FailedPrecondition},
		{"rw flag on a read-only publish", &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: mountCap("ext4", "rw"), Readonly: true}, codes.InvalidArgument},
		{"unknown volume", &csi.NodePublishVolumeRequest{VolumeId: "nope", TargetPath: target, VolumeCapability: mountCap("xfs")}, codes.NotFound},
		{"holds another file system", &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: mountCap("xfs")}, codes.Internal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.node.NodePublishVolume(ctx, tc.req)
			if status.Code(err) != tc.want {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.want)
			}
		})
	}
	if d := f.exec.Device("/dev/vg1/" + f.volume); d.FSType != "ext4" {
		t.Errorf("the ext4 volume was changed: %+v", d)
	}
}

func TestNode_StatsAndExpand(t *testing.T) {
	f := newFixture(t, driver.New(false))
	ctx := context.Background()
	target := filepath.Join(f.dir, "t")
	if _, err := f.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: mountCap("ext4")}); err != nil {
		t.Fatal(err)
	}
	stats, err := f.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: f.volume, VolumePath: target})
	if err != nil || len(stats.Usage) != 2 || stats.Usage[0].Total <= 0 || stats.VolumeCondition.Abnormal {
		t.Fatalf("stats %v, %v: want bytes and inodes of a healthy volume", stats, err)
	}
	f.sim.SetHealth("vg1", f.volume, "partial")
	stats, _ = f.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: f.volume, VolumePath: target})
	if !stats.GetVolumeCondition().GetAbnormal() {
		t.Errorf("condition %v for a partial LV, want abnormal", stats.GetVolumeCondition())
	}
	if _, err := f.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: f.volume, VolumePath: "/nonexistent"}); status.Code(err) != codes.NotFound {
		t.Errorf("stats of a missing path: %v, want NotFound", err)
	}
	// Publish runs resize2fs once (it catches up with growth while unpublished); expansion once more.
	grows := f.exec.Device("/dev/vg1/" + f.volume).Grows
	if _, err := f.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: f.volume, VolumePath: target}); err != nil {
		t.Fatal(err)
	}
	if d := f.exec.Device("/dev/vg1/" + f.volume); d.Grows != grows+1 {
		t.Errorf("resize2fs ran %d times during expansion, want once", d.Grows-grows)
	}
	if _, err := f.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "nope", VolumePath: target}); status.Code(err) != codes.NotFound {
		t.Errorf("expand of an unknown volume: %v, want NotFound", err)
	}
}

func TestNode_Info(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		names := driver.New(legacy)
		f := newFixture(t, names)
		info, err := f.node.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
		if err != nil || info.NodeId != "n1" || info.AccessibleTopology.Segments[names.TopologyKey()] != "n1" {
			t.Errorf("legacy=%v: info %v, %v", legacy, info, err)
		}
	}
	if got := driver.New(true).TopologyKey(); got != "topology.topolvm.cybozu.com/node" {
		t.Errorf("legacy topology key %q", got)
	}
}

func TestCondition(t *testing.T) {
	tests := []struct {
		attr     string
		abnormal bool
	}{
		{"-wi-a-----", false},
		{"Vwi-aotz--", false},
		{"-wi-a---p-", true},
		{"Vwi-a-tzD-", true},
		{"-wi-s-----", true},
		{"-wi", true},
	}
	for _, tc := range tests {
		if got := csinode.Condition(tc.attr); got.Abnormal != tc.abnormal || got.Message == "" {
			t.Errorf("Condition(%q) = %v, want abnormal %v with a message", tc.attr, got, tc.abnormal)
		}
	}
}
