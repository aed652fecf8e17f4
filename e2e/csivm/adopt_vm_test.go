package csivm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/topolvmstate"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
)

// topolvmVolume is a volume TopoLVM made: its LV (named after the LogicalVolume's UID, created with
// TopoLVM's lvcreate flags) with a file system and data on it, and its LogicalVolume as TopoLVM writes it.
type topolvmVolume struct {
	name, class, fs string
	size            int64
	uid             string
	payload         []byte
}

func (v *topolvmVolume) make(t *testing.T, vg string) {
	t.Helper()
	v.uid = uuid.NewString()
	sh(t, "lvcreate", topolvmstate.LVCreateArgs(vg, v.class, v.uid, v.size)...)
	dev := "/dev/" + vg + "/" + v.uid
	v.payload = data(byte(len(v.name)), 4*mib)
	if v.fs == "" {
		writeFile(t, dev, v.payload)
		return
	}
	sh(t, "mkfs."+v.fs, dev)
	dir := t.TempDir()
	sh(t, "mount", dev, dir)
	writeFile(t, filepath.Join(dir, "data"), v.payload)
	sh(t, "umount", dir)
}

func (v *topolvmVolume) object(names driver.Names) *topolvmv1.LogicalVolume {
	size := resource.NewQuantity(v.size, resource.BinarySI)
	return &topolvmv1.LogicalVolume{
		ObjectMeta: metav1.ObjectMeta{Name: v.name, UID: types.UID(v.uid), Finalizers: []string{names.LogicalVolumeFinalizer()},
			Labels: map[string]string{driver.CreatedByLabel: driver.CreatedByValue}},
		Spec:   topolvmv1.LogicalVolumeSpec{Name: v.name, NodeName: "vm", DeviceClass: v.class, Size: *size},
		Status: topolvmv1.LogicalVolumeStatus{VolumeID: v.uid, CurrentSize: size},
	}
}

func (v *topolvmVolume) capability() *csi.VolumeCapability {
	if v.fs == "" {
		return blockCap()
	}
	return mountCap(v.fs)
}

// TestVMTopoLVMAdoption: LVMS started over the state a TopoLVM install (MicroShift before the upgrade) left
// on a node — its lvmd.yaml, thick and thin LVs with data, its LogicalVolumes — in each group
// (topolvm.io, and topolvm.cybozu.com with the legacy names). Starting changes nothing that exists; every
// volume publishes with its data; one grows, one is snapshotted and restored, one is deleted (its LV goes);
// a new one provisions. Then what TopoLVM would read on a rollback is as it was: the lvmd.yaml byte for
// byte, every LV it knows under its name, its LogicalVolumes with its finalizer and their volume IDs.
func TestVMTopoLVMAdoption(t *testing.T) {
	if !vm.InGuest() {
		t.Parallel() // one VM of one vCPU each: two at once use both host cores
		vm.Run(t, vm.Options{Disks: []vm.Disk{{Size: 3 << 30}, {Size: 3 << 30}}, MemoryMiB: 2048})
		return
	}
	disks, err := vm.Disks()
	if err != nil || len(disks) != 2 {
		t.Fatalf("disks %v: %v", disks, err)
	}
	for i, legacy := range []bool{false, true} {
		names := driver.New(legacy)
		t.Run(names.Driver(), func(t *testing.T) { adopt(t, names, disks[i], []string{"rhel", "edge"}[i]) })
	}
}

func adopt(t *testing.T, names driver.Names, disk, vg string) {
	ctx := context.Background()
	sh(t, "pvcreate", "-y", disk)
	sh(t, "vgcreate", vg, disk)
	sh(t, "lvcreate", "-y", "--type", "thin-pool", "-L", "1024M", "-n", "thin", vg)
	path := filepath.Join(t.TempDir(), "lvmd.yaml")
	if err := os.WriteFile(path, []byte(topolvmstate.LVMDConfig(vg)), 0o600); err != nil {
		t.Fatal(err)
	}
	vols := []*topolvmVolume{
		{name: "pvc-db", class: "default", fs: "xfs", size: 400 * mib},
		{name: "pvc-cache", class: "thin", fs: "ext4", size: 512 * mib},
		{name: "pvc-raw", class: "default", size: 64 * mib},
	}
	var objs []client.Object
	for _, v := range vols {
		v.make(t, vg)
		objs = append(objs, v.object(names))
	}
	lvsBefore := lvNames(t, vg)

	cfg, err := lvmd.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d := csidriver.StartFake(t, csidriver.FakeOptions{Names: names, Node: "vm", Runner: lvm.Runner{}, Config: cfg, Objects: objs})
	ctl, node := d.Controller, d.Nodes[0].Service
	time.Sleep(500 * time.Millisecond) // the agent's loop passes over every LogicalVolume many times
	for i, v := range vols {
		got := &topolvmv1.LogicalVolume{}
		if err := d.Client.Get(ctx, client.ObjectKey{Name: v.name}, got); err != nil {
			t.Fatal(err)
		}
		want := objs[i].(*topolvmv1.LogicalVolume)
		if !equality.Semantic.DeepEqual(got.Status, want.Status) || !slices.Equal(got.Finalizers, want.Finalizers) ||
			!equality.Semantic.DeepEqual(got.Labels, want.Labels) || !equality.Semantic.DeepEqual(got.Annotations, want.Annotations) {
			t.Errorf("LVMS changed TopoLVM's LogicalVolume %s: status %+v, finalizers %v, labels %v, annotations %v",
				v.name, got.Status, got.Finalizers, got.Labels, got.Annotations)
		}
	}
	if got := lvNames(t, vg); !slices.Equal(got, lvsBefore) {
		t.Fatalf("LVs after LVMS started: %v, before: %v", got, lvsBefore)
	}

	dir := t.TempDir()
	target := func(v *topolvmVolume) string { return filepath.Join(dir, v.name) }
	for _, v := range vols {
		if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: v.uid, TargetPath: target(v), VolumeCapability: v.capability()}); err != nil {
			t.Fatalf("publish TopoLVM's %s: %v", v.name, err)
		}
		if v.fs == "" {
			readBack(t, target(v), v.payload)
		} else {
			readBack(t, filepath.Join(target(v), "data"), v.payload)
		}
	}
	t.Logf("%d TopoLVM volumes published by LVMS with their data", len(vols))

	db, cache, raw := vols[0], vols[1], vols[2]
	before := fsSize(t, target(db))
	if _, err := ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: db.uid,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 600 * mib}, VolumeCapability: db.capability()}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: db.uid, VolumePath: target(db), VolumeCapability: db.capability()}); err != nil {
		t.Fatal(err)
	}
	if after := fsSize(t, target(db)); after <= before {
		t.Errorf("%s: file system %d bytes after growing, was %d", db.name, after, before)
	}
	readBack(t, filepath.Join(target(db), "data"), db.payload)

	snap, err := ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-cache", SourceVolumeId: cache.uid})
	if err != nil {
		t.Fatal(err)
	}
	restored, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-cache-restored", VolumeCapabilities: []*csi.VolumeCapability{cache.capability()},
		CapacityRange: &csi.CapacityRange{RequiredBytes: cache.size}, Parameters: map[string]string{names.DeviceClassParam(): "thin"},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}}})
	if err != nil {
		t.Fatal(err)
	}
	rtarget := filepath.Join(dir, "restored")
	if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: restored.GetVolume().GetVolumeId(), TargetPath: rtarget, VolumeCapability: cache.capability()}); err != nil {
		t.Fatal(err)
	}
	readBack(t, filepath.Join(rtarget, "data"), cache.payload)

	if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: raw.uid, TargetPath: target(raw)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: raw.uid}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(lvNames(t, vg), raw.uid) {
		t.Errorf("TopoLVM's %s deleted through LVMS, but its LV %s is still there", raw.name, raw.uid)
	}
	fresh, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-new", VolumeCapabilities: []*csi.VolumeCapability{blockCap()},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 64 * mib}, Parameters: map[string]string{names.DeviceClassParam(): "default"}})
	if err != nil || !slices.Contains(lvNames(t, vg), fresh.GetVolume().GetVolumeId()) {
		t.Fatalf("a new volume next to TopoLVM's: %v, %v", fresh, err)
	}
	t.Log("grown, snapshotted and restored, deleted, and a new volume provisioned")

	// Rollback: what TopoLVM reads.
	for _, p := range []string{target(db), target(cache), rtarget} {
		if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "any", TargetPath: p}); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != topolvmstate.LVMDConfig(vg) {
		t.Errorf("the host's lvmd.yaml changed: %q, %v", b, err)
	}
	lvs := lvNames(t, vg)
	for _, v := range []*topolvmVolume{db, cache} {
		lv := &topolvmv1.LogicalVolume{}
		if err := d.Client.Get(ctx, client.ObjectKey{Name: v.name}, lv); err != nil {
			t.Fatal(err)
		}
		if lv.Status.VolumeID != v.uid || !slices.Contains(lvs, v.uid) || !slices.Equal(lv.Finalizers, []string{names.LogicalVolumeFinalizer()}) {
			t.Errorf("for TopoLVM after a rollback, %s: volume ID %s (LV there: %v), finalizers %v", v.name, lv.Status.VolumeID, slices.Contains(lvs, v.uid), lv.Finalizers)
		}
	}
	t.Logf("rollback: lvmd.yaml unchanged, TopoLVM's volumes under their names with its finalizer (LVs: %v)", lvs)
}

// lvNames lists the LVs of vg by name, sorted (the thin pool included).
func lvNames(t *testing.T, vg string) []string {
	t.Helper()
	names := strings.Fields(sh(t, "lvs", "--noheadings", "-o", "lv_name", vg))
	slices.Sort(names)
	return names
}
