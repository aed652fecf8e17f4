package logicalvolume_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/logicalvolume"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
	"github.com/lvms-dev/lvms/nodeagent/lvmsim"
)

const gib = 1 << 30

// node is one node agent's LogicalVolume reconciler on lvmsim with TopoLVM's documented lvmd.yaml
// (testdata/lvmd.yaml: ssd thick on myvg1, hdd on myvg2, ssd-thin on myvg1/thinpool).
type node struct {
	c     client.Client
	sim   *lvmsim.LVM
	rec   *logicalvolume.Reconciler
	lvmd  lvmdapi.Client
	names driver.Names
	// rec records every lvm2 command the node ran.
	lvmRec *lvm.Recorder
}

func newNode(t *testing.T, names driver.Names, objs ...client.Object) *node {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "lvmd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := lvmd.Parse(data)
	if err != nil {
		t.Fatalf("TopoLVM's lvmd.yaml shape is not accepted: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sim := lvmsim.New()
	sim.AddVG("myvg1", 40*gib)
	sim.AddVG("myvg2", 20*gib)
	sim.AddThinPool("myvg1", "thinpool", 10*gib)
	runner := sim.Runner()
	rec := lvm.NewRecorder(runner.Exec, "test")
	runner.Exec = rec
	lvmdClient, stop, err := lvmdapi.InProcess(lvmdapi.NewServer(runner, lvmdapi.StaticConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&topolvmv1.LogicalVolume{}).WithObjects(objs...).Build()
	return &node{c: c, sim: sim, lvmd: lvmdClient, names: names, rec: logicalvolume.New(c, lvmdClient, "worker-1", names), lvmRec: rec}
}

// reconcile runs the reconciler (several times, as watches would) and returns the object afterwards (nil
// when it is gone).
func (n *node) reconcile(t *testing.T, name string) *topolvmv1.LogicalVolume {
	t.Helper()
	for range 3 {
		if _, err := n.rec.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
	}
	lv := &topolvmv1.LogicalVolume{}
	if err := n.c.Get(context.Background(), types.NamespacedName{Name: name}, lv); err != nil {
		return nil
	}
	return lv
}

func newLV(name, dc string, size int64, mutate ...func(*topolvmv1.LogicalVolume)) *topolvmv1.LogicalVolume {
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uuid.NewString())},
		Spec: topolvmv1.LogicalVolumeSpec{Name: name, NodeName: "worker-1", DeviceClass: dc, Size: *resource.NewQuantity(size, resource.BinarySI)}}
	for _, m := range mutate {
		m(lv)
	}
	return lv
}

func TestReconciler_Lifecycle(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		names := driver.New(legacy)
		t.Run(names.Driver(), func(t *testing.T) {
			ctx := context.Background()
			lv := newLV("pvc-a", "", gib)
			n := newNode(t, names, lv)
			got := n.reconcile(t, lv.Name)
			if got.Status.VolumeID != string(lv.UID) || got.Status.CurrentSize.Value() != gib || got.Status.Code != 0 {
				t.Fatalf("status %+v, want volumeID = uid and 1 GiB", got.Status)
			}
			if got.Finalizers[0] != names.LogicalVolumeFinalizer() || got.Labels[driver.CreatedByLabel] != driver.CreatedByValue {
				t.Errorf("metadata %v %v", got.Finalizers, got.Labels)
			}
			if l, ok := n.sim.LV("myvg1", string(lv.UID)); !ok || l.Size != gib {
				t.Fatalf("LV in the default class's VG: %+v (exists %v)", l, ok)
			}

			got.Spec.Size = *resource.NewQuantity(3*gib, resource.BinarySI)
			if err := n.c.Update(ctx, got); err != nil {
				t.Fatal(err)
			}
			if got = n.reconcile(t, lv.Name); got.Status.CurrentSize.Value() != 3*gib {
				t.Errorf("currentSize after growing %s", got.Status.CurrentSize)
			}
			if l, _ := n.sim.LV("myvg1", string(lv.UID)); l.Size != 3*gib {
				t.Errorf("LV size after growing %d", l.Size)
			}

			if err := n.c.Delete(ctx, got); err != nil {
				t.Fatal(err)
			}
			if got = n.reconcile(t, lv.Name); got != nil {
				t.Errorf("LogicalVolume still exists after deletion: finalizers %v", got.Finalizers)
			}
			if _, ok := n.sim.LV("myvg1", string(lv.UID)); ok {
				t.Error("LV still exists after the LogicalVolume was deleted")
			}
		})
	}
}

// TestReconciler_AdoptsAfterCrash: lvcreate succeeded but the agent died before writing status; the LV
// named after the uid is adopted, not created twice.
func TestReconciler_AdoptsAfterCrash(t *testing.T) {
	lv := newLV("pvc-crash", "ssd", gib)
	n := newNode(t, driver.New(false), lv)
	if _, err := n.lvmd.CreateLV(context.Background(), &proto.CreateLVRequest{Name: string(lv.UID), DeviceClass: "ssd", SizeBytes: gib}); err != nil {
		t.Fatal(err)
	}
	n.sim.FailNext("lvcreate", "lvcreate must not run again")
	got := n.reconcile(t, lv.Name)
	if got.Status.VolumeID != string(lv.UID) || got.Status.Code != 0 || got.Status.CurrentSize.Value() != gib {
		t.Fatalf("status %+v, want the existing LV adopted", got.Status)
	}
	if lvs := n.sim.LVs("myvg1"); len(lvs) != 2 { // the thin pool and the adopted LV
		t.Errorf("LVs %+v, want the thin pool and one volume", lvs)
	}
}

func TestReconciler_Failures(t *testing.T) {
	tests := []struct {
		name     string
		lv       *topolvmv1.LogicalVolume
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "no space", lv: newLV("big", "hdd", 100*gib), wantCode: codes.ResourceExhausted, wantMsg: "not enough space"},
		{name: "unknown device class", lv: newLV("nvme", "nvme", gib), wantCode: codes.NotFound, wantMsg: "device-class not found: nvme"},
		{name: "snapshot of a thick volume", lv: newLV("snap", "ssd", gib, func(l *topolvmv1.LogicalVolume) { l.Spec.Source, l.Spec.AccessType = "src", "ro" }),
			wantCode: codes.Unimplemented, wantMsg: "thick"},
		{name: "bad access type", lv: newLV("snap2", "ssd-thin", gib, func(l *topolvmv1.LogicalVolume) { l.Spec.Source, l.Spec.AccessType = "src", "rx" }),
			wantCode: codes.InvalidArgument, wantMsg: "accessType"},
	}
	src := newLV("src", "ssd", gib, func(l *topolvmv1.LogicalVolume) { l.Status.VolumeID = string(l.UID) })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, driver.New(false), tc.lv, src.DeepCopy())
			if _, err := n.lvmd.CreateLV(context.Background(), &proto.CreateLVRequest{Name: src.Status.VolumeID, DeviceClass: "ssd", SizeBytes: gib}); err != nil {
				t.Fatal(err)
			}
			got := n.reconcile(t, tc.lv.Name)
			if codes.Code(got.Status.Code) != tc.wantCode || !strings.Contains(got.Status.Message, tc.wantMsg) || got.Status.VolumeID != "" {
				t.Errorf("status %+v, want code %v with %q and no volume", got.Status, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestReconciler_ThinSnapshotAndClone(t *testing.T) {
	src := newLV("src", "ssd-thin", 2*gib)
	snap := newLV("snap", "ssd-thin", 2*gib, func(l *topolvmv1.LogicalVolume) { l.Spec.Source, l.Spec.AccessType = "src", "ro" })
	clone := newLV("clone", "ssd-thin", 3*gib, func(l *topolvmv1.LogicalVolume) { l.Spec.Source, l.Spec.AccessType = "snap", "rw" })
	n := newNode(t, driver.New(false), src, snap, clone)
	n.reconcile(t, "src")
	n.reconcile(t, "snap")
	got := n.reconcile(t, "clone")
	if got.Status.CurrentSize.Value() != 3*gib {
		t.Fatalf("clone status %+v", got.Status)
	}
	s, _ := n.sim.LV("myvg1", string(snap.UID))
	c, _ := n.sim.LV("myvg1", string(clone.UID))
	if s.Origin != string(src.UID) || !s.ReadOnly || c.Origin != string(snap.UID) || c.ReadOnly || c.Size != 3*gib {
		t.Errorf("snapshot %+v, clone %+v", s, c)
	}
}

// TestReconciler_AdoptsTopoLVMObjects: LogicalVolumes exported from a TopoLVM cluster (current and legacy
// group) are used unchanged: no new LV, deletion removes the existing one.
func TestReconciler_AdoptsTopoLVMObjects(t *testing.T) {
	for _, tc := range []struct {
		file   string
		legacy bool
	}{{"logicalvolume.yaml", false}, {"logicalvolume-legacy.yaml", true}} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			lv := &topolvmv1.LogicalVolume{}
			if err := yaml.UnmarshalStrict(data, lv); err != nil {
				t.Fatalf("TopoLVM's LogicalVolume shape does not decode: %v", err)
			}
			names := driver.New(tc.legacy)
			if lv.APIVersion != names.GroupVersion().String() {
				t.Fatalf("apiVersion %s, want %s", lv.APIVersion, names.GroupVersion())
			}
			n := newNode(t, names, lv.DeepCopy())
			if _, err := n.lvmd.CreateLV(context.Background(), &proto.CreateLVRequest{Name: lv.Status.VolumeID, DeviceClass: "ssd", SizeBytes: gib}); err != nil {
				t.Fatal(err)
			}
			n.sim.FailNext("lvcreate", "lvcreate must not run for an existing volume")
			got := n.reconcile(t, lv.Name)
			if got.Status.VolumeID != lv.Status.VolumeID || got.Status.CurrentSize.Cmp(*lv.Status.CurrentSize) != 0 || got.Spec != lv.Spec {
				t.Errorf("object changed: %+v / %+v", got.Spec, got.Status)
			}
			if err := n.c.Delete(context.Background(), got); err != nil {
				t.Fatal(err)
			}
			if n.reconcile(t, lv.Name) != nil {
				t.Error("object not released after deletion")
			}
			if _, ok := n.sim.LV("myvg1", lv.Status.VolumeID); ok {
				t.Error("the TopoLVM volume was not removed")
			}
		})
	}
}

// TestLVMDConfig_TopoLVMShape serves TopoLVM's documented lvmd.yaml and checks the capacity it reports.
func TestLVMDConfig_TopoLVMShape(t *testing.T) {
	n := newNode(t, driver.New(false))
	stream, err := n.lvmd.Watch(context.Background(), &proto.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	// myvg1: 40 GiB − 10 GiB pool = 30 GiB free, minus spare 10 GiB; myvg2: 20 − 1 spare; thin: 10 × 10 GiB.
	want := map[string]uint64{"ssd": 20 * gib, "hdd": 19 * gib, "ssd-thin": 30 * gib}
	for _, it := range msg.Items {
		if it.GetFreeBytes() != want[it.GetDeviceClass()] {
			t.Errorf("%s: free %d, want %d", it.GetDeviceClass(), it.GetFreeBytes(), want[it.GetDeviceClass()])
		}
	}
	// TopoLVM's file has no usage thresholds: the defaults apply, and the empty pool's real room below 90 %
	// (9 GiB) is less than what the ratio allows (10 × 10 GiB).
	if tp := msg.Items[2].GetThinPool(); tp.GetOverprovisionBytes() != 9*gib {
		t.Errorf("thin pool free %d, want %d", tp.GetOverprovisionBytes(), 9*gib)
	}
	if msg.FreeBytes != 20*gib {
		t.Errorf("default class free %d, want %d", msg.FreeBytes, 20*gib)
	}
}

// ranLVRemove lists the lvremove commands the node ran.
func (n *node) ranLVRemove() []string {
	var out []string
	for _, c := range n.lvmRec.Session().Commands {
		if slices.Contains(c.Argv, "lvremove") {
			out = append(out, strings.Join(c.Argv, " "))
		}
	}
	return out
}

// deleting returns a LogicalVolume with the finalizer and a volume, about to be deleted.
func deleting(name string, names driver.Names, volumeID string) *topolvmv1.LogicalVolume {
	return newLV(name, "ssd", gib, func(l *topolvmv1.LogicalVolume) {
		l.Finalizers = []string{names.LogicalVolumeFinalizer()}
		l.Labels = map[string]string{driver.CreatedByLabel: driver.CreatedByValue}
		l.Status.VolumeID = volumeID
		l.Status.CurrentSize = resource.NewQuantity(gib, resource.BinarySI)
	})
}

// TestReconciler_DeleteRefusesForeignVolumeID: a LogicalVolume whose status.volumeID names another
// volume's LV does not make the agent remove that LV; the refusal is on its status and the finalizer stays.
func TestReconciler_DeleteRefusesForeignVolumeID(t *testing.T) {
	ctx := context.Background()
	names := driver.New(false)
	victim := newLV("pvc-victim", "ssd", gib)
	n := newNode(t, names, victim)
	n.reconcile(t, victim.Name)
	if _, ok := n.sim.LV("myvg1", string(victim.UID)); !ok {
		t.Fatal("the victim's LV was not created")
	}
	bad := deleting("pvc-bad", names, string(victim.UID))
	if err := n.c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if err := n.c.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	got := n.reconcile(t, bad.Name)
	if got == nil {
		t.Fatal("the LogicalVolume was released although its LV was not removed")
	}
	if codes.Code(got.Status.Code) != codes.PermissionDenied ||
		!strings.Contains(got.Status.Message, fmt.Sprintf("status.volumeID %q is not this LogicalVolume's uid %s", victim.UID, bad.UID)) {
		t.Errorf("status %+v, want PermissionDenied naming the volumeID and the uid", got.Status)
	}
	if _, ok := n.sim.LV("myvg1", string(victim.UID)); !ok {
		t.Error("another volume's LV was removed")
	}
	if ran := n.ranLVRemove(); len(ran) > 0 {
		t.Errorf("ran %v", ran)
	}
}

// TestReconciler_DeleteByTaggedVolumeID: a LogicalVolume restored from a backup (new uid, old volumeID)
// removes its LV, which carries its tag.
func TestReconciler_DeleteByTaggedVolumeID(t *testing.T) {
	ctx := context.Background()
	names := driver.New(false)
	const oldUID = "8a1c4d2e-5b6f-4a7b-8c9d-0e1f2a3b4c5d"
	restored := deleting("pvc-restored", names, oldUID)
	n := newNode(t, names, restored)
	if _, err := n.lvmd.CreateLV(ctx, &proto.CreateLVRequest{Name: oldUID, DeviceClass: "ssd", SizeBytes: gib,
		Tags: []string{logicalvolume.ObjectTag(restored.Name)}}); err != nil {
		t.Fatal(err)
	}
	if err := n.c.Delete(ctx, restored); err != nil {
		t.Fatal(err)
	}
	if got := n.reconcile(t, restored.Name); got != nil {
		t.Fatalf("not released: status %+v", got.Status)
	}
	if _, ok := n.sim.LV("myvg1", oldUID); ok {
		t.Error("the restored volume's LV was not removed")
	}
}

// TestReconciler_DeleteRefusedByLVMD: lvmd's refusal reaches the status and keeps the finalizer. Here
// the LogicalVolume's LV is a thin volume while spec.deviceClass names the thick class of the same VG.
func TestReconciler_DeleteRefusedByLVMD(t *testing.T) {
	ctx := context.Background()
	names := driver.New(false)
	lv := deleting("pvc-moved", names, "")
	lv.Status.VolumeID = string(lv.UID)
	n := newNode(t, names, lv)
	if _, err := n.lvmd.CreateLV(ctx, &proto.CreateLVRequest{Name: string(lv.UID), DeviceClass: "ssd-thin", SizeBytes: gib}); err != nil {
		t.Fatal(err)
	}
	if err := n.c.Delete(ctx, lv); err != nil {
		t.Fatal(err)
	}
	got := n.reconcile(t, lv.Name)
	if got == nil {
		t.Fatal("released although lvmd refused")
	}
	if codes.Code(got.Status.Code) != codes.FailedPrecondition || !strings.Contains(got.Status.Message, `is not a volume of device class "ssd"`) {
		t.Errorf("status %+v, want lvmd's FailedPrecondition", got.Status)
	}
	if ran := n.ranLVRemove(); len(ran) > 0 {
		t.Errorf("ran %v", ran)
	}
}

// TestReconciler_DeleteVolumeIDNamingPool: a status.volumeID naming the thin pool never reaches lvremove.
func TestReconciler_DeleteVolumeIDNamingPool(t *testing.T) {
	ctx := context.Background()
	names := driver.New(false)
	lv := deleting("pvc-pool", names, "thinpool")
	lv.Spec.DeviceClass = "ssd-thin"
	n := newNode(t, names, lv)
	if err := n.c.Delete(ctx, lv); err != nil {
		t.Fatal(err)
	}
	n.reconcile(t, lv.Name)
	if _, ok := n.sim.LV("myvg1", "thinpool"); !ok {
		t.Fatal("the thin pool was removed")
	}
	for _, c := range n.ranLVRemove() {
		if strings.Contains(c, "thinpool") {
			t.Errorf("ran %s", c)
		}
	}
}

func TestReconciler_CreatesTaggedLVs(t *testing.T) {
	lv := newLV("pvc-tags", "ssd", gib)
	n := newNode(t, driver.New(false), lv)
	n.reconcile(t, lv.Name)
	got, _ := n.sim.LV("myvg1", string(lv.UID))
	if !slices.Contains(got.Tags, logicalvolume.ObjectTag(lv.Name)) || !slices.Contains(got.Tags, lvm.VolumeTag) {
		t.Errorf("tags %v, want %q and %q", got.Tags, logicalvolume.ObjectTag(lv.Name), lvm.VolumeTag)
	}
}

// TestReconciler_ExpandRefusesForeignVolumeID: growing spec.size of a LogicalVolume whose status.volumeID
// names another volume's LV does not grow that LV.
func TestReconciler_ExpandRefusesForeignVolumeID(t *testing.T) {
	ctx := context.Background()
	names := driver.New(false)
	victim := newLV("pvc-victim", "ssd", gib)
	n := newNode(t, names, victim)
	n.reconcile(t, victim.Name)
	bad := deleting("pvc-grow", names, string(victim.UID))
	bad.Spec.Size = *resource.NewQuantity(4*gib, resource.BinarySI)
	if err := n.c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	// Reconcile returns the refusal for a retry; what a user sees is the status.
	_, _ = n.rec.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: bad.Name}})
	got := &topolvmv1.LogicalVolume{}
	if err := n.c.Get(ctx, types.NamespacedName{Name: bad.Name}, got); err != nil {
		t.Fatal(err)
	}
	if codes.Code(got.Status.Code) != codes.PermissionDenied || !strings.Contains(got.Status.Message, "may be another volume's LV") {
		t.Errorf("status %+v, want PermissionDenied", got.Status)
	}
	if l, _ := n.sim.LV("myvg1", string(victim.UID)); l.Size != gib {
		t.Errorf("another volume's LV grew to %d", l.Size)
	}
}
