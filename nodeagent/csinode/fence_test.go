package csinode_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/csinode"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
)

// publishReq is kubelet's publication of f's volume for pod ns/name.
func (f *fixture) publishReq(target, ns, pod string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{VolumeId: f.volume, TargetPath: target, VolumeCapability: mountCap("ext4"),
		VolumeContext: map[string]string{"csi.storage.k8s.io/pod.namespace": ns, "csi.storage.k8s.io/pod.name": pod}}
}

// The move fence: a held volume is refused to every pod, naming the move; the pod is reported; a release lets
// the next publication through. The hold comes from the fence (Hold) or, before the fence looked after a
// restart, from the LogicalVolume's annotation.
func TestNode_HeldVolume_RefusedToEveryPod(t *testing.T) {
	for _, from := range []string{"fence", "annotation"} {
		t.Run(from, func(t *testing.T) {
			names := driver.New(false)
			var refused []csinode.Refusal
			f := newFixtureWith(t, names, func(o *csinode.Options, lv *topolvmv1.LogicalVolume) {
				o.OnRefused = func(r csinode.Refusal) { refused = append(refused, r) }
				if from == "annotation" {
					lv.Annotations = map[string]string{moveapi.AnnotationHold: "00000000000000aa"}
				}
			})
			if from == "fence" {
				// Hold reads the mount table of the fixture's simulated device, which is not a real one: the
				// hold is taken all the same (the error is the fence's to report).
				_, _ = f.node.Hold(context.Background(), f.volume, "00000000000000aa")
			}
			target := filepath.Join(f.dir, "pods", "web-0", "mount")
			_, err := f.node.NodePublishVolume(context.Background(), f.publishReq(target, "shop", "web-0"))
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "source of volume move 00000000000000aa") ||
				!strings.Contains(err.Error(), "lvms move abort") {
				t.Fatalf("publication of a held volume: %v; want FailedPrecondition naming the move and how to stop it", err)
			}
			if mps, _ := f.mounter.List(); len(mps) != 0 {
				t.Fatalf("a held volume was mounted: %v", mps)
			}
			if len(refused) != 1 || refused[0] != (csinode.Refusal{VolumeID: f.volume, LogicalVolume: "pvc-1", MoveID: "00000000000000aa", Pod: "shop/web-0"}) {
				t.Fatalf("refusals reported %+v", refused)
			}
			if from == "fence" {
				f.node.Release(f.volume)
				if _, err := f.node.NodePublishVolume(context.Background(), f.publishReq(target, "shop", "web-0")); err != nil {
					t.Fatalf("after the release: %v", err)
				}
			}
		})
	}
}

// pathLVMD answers GetLVList with every LV's path set to path: a real device for the mount table.
type pathLVMD struct {
	lvmdapi.Client
	path string
}

func (p pathLVMD) GetLVList(ctx context.Context, in *proto.GetLVListRequest, opts ...grpc.CallOption) (*proto.GetLVListResponse, error) {
	resp, err := p.Client.GetLVList(ctx, in, opts...)
	for _, v := range resp.GetVolumes() {
		v.Path = p.path
	}
	return resp, err
}

// Hold finds every publication in the real mount table: a mounted file system and a bind-mounted block
// device, each reported by its mount point until it is unmounted; an unrelated mount is not reported.
func TestNode_Hold_FindsPublicationsInTheMountTable(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	dev := loopdev.Attach(t, dir, 64<<20, false)
	other := loopdev.Attach(t, dir, 64<<20, false)
	for _, d := range []string{dev, other} {
		loopdev.Run(t, "mkfs.ext4", "-q", d)
	}
	names := driver.New(false)
	f := newFixtureWith(t, names, func(o *csinode.Options, _ *topolvmv1.LogicalVolume) {
		o.Mounter, o.Exec = nil, nil // the host's mount and umount
	})
	f.node = csinode.NewNode(csinode.Options{NodeName: "n1", Names: names, Client: f.client, LVMD: pathLVMD{Client: f.lvmd, path: dev}})
	hold := func() []string {
		t.Helper()
		pubs, err := f.node.Hold(context.Background(), f.volume, "00000000000000aa")
		if err != nil {
			t.Fatal(err)
		}
		return pubs
	}
	if pubs := hold(); len(pubs) != 0 {
		t.Fatalf("nothing is mounted yet, Hold says published at %v", pubs)
	}
	fsTarget, blockTarget, otherTarget := filepath.Join(dir, "fs"), filepath.Join(dir, "block"), filepath.Join(dir, "other")
	for _, d := range []string{fsTarget, otherTarget} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(blockTarget, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mount := func(args ...string) {
		t.Helper()
		loopdev.Run(t, "mount", args...)
		target := args[len(args)-1]
		t.Cleanup(func() { _ = exec.Command("umount", target).Run() })
	}
	mount(other, otherTarget)
	mount(dev, fsTarget)
	mount("--bind", dev, blockTarget)
	if pubs := hold(); !slices.Equal(pubs, []string{blockTarget, fsTarget}) {
		t.Fatalf("Hold says published at %v, want the file system %s and the block device %s", pubs, fsTarget, blockTarget)
	}
	loopdev.Run(t, "umount", fsTarget)
	loopdev.Run(t, "umount", blockTarget)
	if pubs := hold(); len(pubs) != 0 {
		t.Fatalf("after unmounting, Hold says published at %v", pubs)
	}
}

// TestNode_Hold_FindsBtrfsAndDeviceNodesOnTmpfs: publications the mount table shows in other shapes are found
// too — a btrfs file system (the kernel gives it an anonymous device number, 0:N, with the device as its
// source), and a block publication whose device node lives on a tmpfs (a container's /dev is one).
func TestNode_Hold_FindsBtrfsAndDeviceNodesOnTmpfs(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	mount := func(args ...string) {
		t.Helper()
		loopdev.Run(t, "mount", args...)
		target := args[len(args)-1]
		t.Cleanup(func() { _ = exec.Command("umount", target).Run() })
	}
	holdOf := func(dev string) []string {
		t.Helper()
		names := driver.New(false)
		f := newFixtureWith(t, names, func(o *csinode.Options, _ *topolvmv1.LogicalVolume) { o.Mounter, o.Exec = nil, nil })
		f.node = csinode.NewNode(csinode.Options{NodeName: "n1", Names: names, Client: f.client, LVMD: pathLVMD{Client: f.lvmd, path: dev}})
		pubs, err := f.node.Hold(context.Background(), f.volume, "00000000000000aa")
		if err != nil {
			t.Fatal(err)
		}
		f.node.Release(f.volume)
		return pubs
	}

	t.Run("btrfs", func(t *testing.T) {
		dev := loopdev.Attach(t, dir, 256<<20, false)
		loopdev.Run(t, "mkfs.btrfs", "-q", dev)
		target := filepath.Join(dir, "btrfs")
		if err := os.Mkdir(target, 0o755); err != nil {
			t.Fatal(err)
		}
		mount(dev, target)
		if pubs := holdOf(dev); !slices.Equal(pubs, []string{target}) {
			t.Errorf("Hold says published at %v, want the btrfs mount %s", pubs, target)
		}
	})

	t.Run("device node on tmpfs", func(t *testing.T) {
		dev := loopdev.Attach(t, dir, 64<<20, false)
		var st unix.Stat_t
		if err := unix.Stat(dev, &st); err != nil {
			t.Fatal(err)
		}
		devDir, target := filepath.Join(dir, "dev"), filepath.Join(dir, "block")
		if err := os.Mkdir(devDir, 0o755); err != nil {
			t.Fatal(err)
		}
		mount("-t", "tmpfs", "tmpfs", devDir)
		node := filepath.Join(devDir, "vol")
		if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(st.Rdev)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		mount("--bind", node, target)
		// A character device can carry the same numbers as the block device (char 7:0 is /dev/vcs, block 7:0
		// is loop0): bind-mounted, it is no publication of the volume.
		char, charTarget := filepath.Join(devDir, "char"), filepath.Join(dir, "char")
		if err := unix.Mknod(char, unix.S_IFCHR|0o600, int(st.Rdev)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(charTarget, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		mount("--bind", char, charTarget)
		if pubs := holdOf(dev); !slices.Equal(pubs, []string{target}) {
			t.Errorf("Hold says published at %v, want the block publication %s (its node on a tmpfs) and not the character device at %s", pubs, target, charTarget)
		}
	})
}

// TestNode_HeldVolume_PodNamedOnlyWhenKnown: a refusal names the pod only when kubelet passed both its namespace
// and its name (podInfoOnMount); with one of them missing, no half name is reported.
func TestNode_HeldVolume_PodNamedOnlyWhenKnown(t *testing.T) {
	for _, tc := range []struct{ ns, pod, want string }{{"shop", "", ""}, {"", "web-0", ""}, {"shop", "web-0", "shop/web-0"}} {
		var refused []csinode.Refusal
		f := newFixtureWith(t, driver.New(false), func(o *csinode.Options, lv *topolvmv1.LogicalVolume) {
			o.OnRefused = func(r csinode.Refusal) { refused = append(refused, r) }
			lv.Annotations = map[string]string{moveapi.AnnotationHold: "00000000000000aa"}
		})
		req := f.publishReq(filepath.Join(f.dir, "mount"), tc.ns, tc.pod)
		if _, err := f.node.NodePublishVolume(context.Background(), req); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("publication of a held volume: %v, want FailedPrecondition", err)
		}
		if len(refused) != 1 || refused[0].Pod != tc.want {
			t.Errorf("namespace %q, pod %q: refusals %+v, want the pod reported as %q", tc.ns, tc.pod, refused, tc.want)
		}
	}
}

// TestNode_MoveDeviceDir_HoldAndDeviceUseTheStandIn: with MoveDeviceDir (lvms local --simulated's nodes,
// which activate no volume), the fence finds lvmd's /dev/<vg>/<lv> under that directory instead: the stand-in
// device is what Hold checks for publications and what Device hands the re-verification.
func TestNode_MoveDeviceDir_HoldAndDeviceUseTheStandIn(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	dev := loopdev.Attach(t, dir, 64<<20, false)
	loopdev.Run(t, "mkfs.ext4", "-q", dev)
	standIns := filepath.Join(dir, "dev")
	if err := os.MkdirAll(filepath.Join(standIns, "vg-none"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dev, filepath.Join(standIns, "vg-none", "lv-none")); err != nil {
		t.Fatal(err)
	}
	names := driver.New(false)
	f := newFixtureWith(t, names, func(o *csinode.Options, _ *topolvmv1.LogicalVolume) {})
	lvmd := pathLVMD{Client: f.lvmd, path: "/dev/vg-none/lv-none"} // no such device on this machine
	plain := csinode.NewNode(csinode.Options{NodeName: "n1", Names: names, Client: f.client, LVMD: lvmd})
	if _, err := plain.Hold(context.Background(), f.volume, "00000000000000aa"); err == nil || !strings.Contains(err.Error(), "/dev/vg-none/lv-none") {
		t.Fatalf("without MoveDeviceDir Hold = %v, want lvmd's path tried", err)
	}
	node := csinode.NewNode(csinode.Options{NodeName: "n1", Names: names, Client: f.client, LVMD: lvmd, MoveDeviceDir: standIns})
	if pubs, err := node.Hold(context.Background(), f.volume, "00000000000000aa"); err != nil || len(pubs) != 0 {
		t.Fatalf("Hold on the stand-in = %v, %v; want held, no publication", pubs, err)
	}
	target := filepath.Join(dir, "fs")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	loopdev.Run(t, "mount", dev, target)
	t.Cleanup(func() { _ = exec.Command("umount", target).Run() })
	device, pubs, err := node.Device(context.Background(), f.volume)
	if err != nil || device != filepath.Join(standIns, "vg-none", "lv-none") || !slices.Equal(pubs, []string{target}) {
		t.Fatalf("Device = %s, %v, %v; want the stand-in, published at %s", device, pubs, err, target)
	}
}
