package handover_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// errStopped is the injected stop: the process "dies" before this write reaches the API server.
var errStopped = errors.New("injected stop")

// writeCounter counts API writes that reached the API server (a write refused with a conflict changed
// nothing and is retried) and, with limit >= 0, lets only the first limit through.
type writeCounter struct {
	client.Client
	limit, writes int
}

func (w *writeCounter) write(do func() error) error {
	if w.limit >= 0 && w.writes >= w.limit {
		return errStopped
	}
	err := do()
	if !apierrors.IsConflict(err) {
		w.writes++
	}
	return err
}

func (w *writeCounter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, review := obj.(*authv1.SelfSubjectAccessReview); review {
		return w.Client.Create(ctx, obj, opts...) // an access review writes nothing
	}
	return w.write(func() error { return w.Client.Create(ctx, obj, opts...) })
}

func (w *writeCounter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return w.write(func() error { return w.Client.Patch(ctx, obj, p, opts...) })
}

func (w *writeCounter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return w.write(func() error { return w.Client.Update(ctx, obj, opts...) })
}

func (w *writeCounter) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return w.write(func() error { return w.Client.Delete(ctx, obj, opts...) })
}

func (w *writeCounter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return w.write(func() error { return w.Client.Apply(ctx, obj, opts...) })
}

// fixture is one namespace with the operator, a v1 and a v2 node agent played by test doubles (they
// write LVMVolumeGroupNodeStatus and LVMNode status as an agent that adopted the volume groups would:
// /dev/<vg>-disk for every volume group, and the thin pools of its device classes), two nodes and a
// seed-shaped LVMCluster (a thin default class and a thick ext4 class on explicit paths) with a volume.
type fixture struct {
	t     *testing.T
	ns    string
	c     client.Client
	label string
	nodes []string
}

func newFixture(t *testing.T, v1 optest.V1Report) *fixture {
	ns := env.Namespace(t)
	f := &fixture{t: t, ns: ns, c: env.Client, label: "test.lvms.io/" + ns}
	optest.Start(t, env.Config, operator.Options{Namespace: ns})
	optest.StartFakeV1Agent(t, env.Config, ns, v1)
	optest.StartFakeAgent(t, env.Config, ns, adoptedReport)
	optest.CleanUpNamespace(t, env.Client, ns)
	t.Cleanup(f.unmarkAll) // runs before CleanUpNamespace: the teardown then removes the classes
	for _, n := range []string{"a", "b"} {
		optest.Node(t, f.c, ns+"-"+n, map[string]string{f.label: "archive-storage"})
		f.nodes = append(f.nodes, ns+"-"+n)
	}
	f.create(f.seedCluster())
	f.waitReady()
	f.seedVolume()
	return f
}

// adoptedReport plays a node agent that adopted every volume group of the LVMNode as it is.
func adoptedReport(n *lvmv2.LVMNode) *lvmv2.LVMNodeStatus {
	st := optest.ReportReady(n)
	for i := range st.VolumeGroups {
		vg := &st.VolumeGroups[i]
		vg.Devices.Included = []lvmv2.Device{{KName: "/dev/" + vg.Name + "-disk"}}
		for _, dc := range n.Spec.DeviceClasses {
			if dc.VolumeGroup == vg.Name && dc.Thin != nil {
				vg.Volumes = append(vg.Volumes, lvmv2.LogicalVolumeStatus{Name: dc.Thin.PoolName})
			}
		}
	}
	return st
}

func (f *fixture) dc(name string) string { return f.ns + "-" + name }

func (f *fixture) seedCluster() *lvmv1.LVMCluster {
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: f.label, Operator: corev1.NodeSelectorOpIn, Values: []string{"archive-storage"}}}}}}
	return &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "my-lvmcluster", Namespace: f.ns},
		Spec: lvmv1.LVMClusterSpec{Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{
			{Name: f.dc("vg1"), Default: true, NodeSelector: sel,
				DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/mapper/some-encrypted-device"}},
				ThinPoolConfig: &lvmv1.ThinPoolConfig{Name: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10}},
			{Name: f.dc("othervg"), FilesystemType: "ext4", NodeSelector: sel,
				DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/mapper/some-default-device"}}},
		}}}}
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := f.c.Create(context.Background(), obj); err != nil {
		f.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (f *fixture) cluster() *lvmv1.LVMCluster {
	var cl lvmv1.LVMCluster
	if !optest.Get(f.t, f.c, client.ObjectKey{Namespace: f.ns, Name: "my-lvmcluster"}, &cl) {
		return nil
	}
	return &cl
}

func (f *fixture) waitReady() {
	f.t.Helper()
	optest.Eventually(f.t, "the LVMCluster managing both nodes", func() (bool, string) {
		cl := f.cluster()
		return cl != nil && cl.Status.ObservedGeneration == cl.Generation && len(cl.Status.DeviceClassStatuses) == 2 &&
			len(cl.Status.DeviceClassStatuses[0].NodeStatus) == 2 && len(cl.Status.DeviceClassStatuses[1].NodeStatus) == 2 &&
			cl.Status.DeviceClassStatuses[1].NodeStatus[1].Status != "", optest.Describe(cl.Status)
	})
	optest.Eventually(f.t, "both v1 node agents reporting both volume groups", func() (bool, string) {
		for _, n := range f.nodes {
			var st lvmv1.LVMVolumeGroupNodeStatus
			if !optest.Get(f.t, f.c, client.ObjectKey{Namespace: f.ns, Name: n}, &st) || len(st.Spec.LVMVGStatus) != 2 {
				return false, optest.Describe(st.Spec)
			}
		}
		return true, ""
	})
	optest.Eventually(f.t, "the LVMCluster's StorageClasses", func() (bool, string) {
		var sc storagev1.StorageClass
		return optest.Get(f.t, f.c, client.ObjectKey{Name: "lvms-" + f.dc("vg1")}, &sc) &&
			optest.Get(f.t, f.c, client.ObjectKey{Name: "lvms-" + f.dc("othervg")}, &sc), ""
	})
}

// seedVolume plays a provisioned volume: a LogicalVolume and its PV on node a (no controller manager or
// CSI driver runs here).
func (f *fixture) seedVolume() {
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + f.ns},
		Spec: topolvmv1.LogicalVolumeSpec{Name: "pvc-" + f.ns, NodeName: f.nodes[0], Size: resource.MustParse("1Gi"), DeviceClass: f.dc("vg1")}}
	f.create(lv)
	f.t.Cleanup(func() { _ = f.c.Delete(context.Background(), lv) })
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + f.ns},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              "lvms-" + f.dc("vg1"),
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "topolvm.io", VolumeHandle: "pvc-" + f.ns}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.topolvm.io/node", Operator: corev1.NodeSelectorOpIn, Values: []string{f.nodes[0]}}},
			}}}},
		}}
	f.create(pv)
	f.t.Cleanup(func() { optest.DeletePV(f.t, f.c, pv) })
}

// plan plans the migration from the cluster, as lvms migrate does.
func (f *fixture) plan() *plan.Plan {
	f.t.Helper()
	p, err := handover.PlanFromCluster(context.Background(), f.c, f.ns, "my-lvmcluster")
	if err != nil {
		f.t.Fatalf("plan: %v", err)
	}
	return p
}

func (f *fixture) migrator(c client.Client) *handover.Migrator {
	return &handover.Migrator{Client: c, Poll: 50 * time.Millisecond, Timeout: optest.DefaultTimeout}
}

func sortedCopy(s []string) []string { out := slices.Clone(s); slices.Sort(out); return out }

// unmarkAll removes the keep mark from the LVMCluster and the sets, so that the test's teardown removes
// what they generated.
func (f *fixture) unmarkAll() {
	ctx := context.Background()
	var sets lvmv2.LVMNodeSetList
	_ = f.c.List(ctx, &sets, client.InNamespace(f.ns))
	objs := []client.Object{}
	for i := range sets.Items {
		objs = append(objs, &sets.Items[i])
	}
	if cl := f.cluster(); cl != nil {
		objs = append(objs, cl)
	}
	for _, o := range objs {
		patch := []byte(`{"metadata":{"annotations":{"` + names.KeepStorageOnDeleteAnnotation + `":null}}}`)
		_ = f.c.Patch(ctx, o, client.RawPatch(types.MergePatchType, patch))
	}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
