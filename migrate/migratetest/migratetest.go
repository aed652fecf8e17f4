package migratetest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// ClusterName is the fixture's LVMCluster.
const ClusterName = "my-lvmcluster"

// Fixture is one namespace with the operator, a v1 and a v2 node agent played by test doubles (they
// write LVMVolumeGroupNodeStatus and LVMNode status as an agent that adopted the volume groups would:
// /dev/<vg>-disk for every volume group, and the thin pools of its device classes), two nodes and a
// seed-shaped LVMCluster (a thin default class and a thick ext4 class on explicit paths) with a volume.
type Fixture struct {
	T     *testing.T
	NS    string
	C     client.Client
	Label string
	Nodes []string
}

// New starts the operator and both fake agents in a fresh namespace of env and creates the nodes, the
// LVMCluster and its volume, ready to migrate.
func New(t *testing.T, env *testenv.Env, v1 optest.V1Report) *Fixture {
	ns := env.Namespace(t)
	f := &Fixture{T: t, NS: ns, C: env.Client, Label: "test.lvms.io/" + ns}
	optest.Start(t, env.Config, operator.Options{Namespace: ns})
	optest.StartFakeV1Agent(t, env.Config, ns, v1)
	optest.StartFakeAgent(t, env.Config, ns, AdoptedReport)
	optest.CleanUpNamespace(t, env.Client, ns)
	t.Cleanup(f.UnmarkAll) // runs before CleanUpNamespace: the teardown then removes the classes
	for _, n := range []string{"a", "b"} {
		optest.Node(t, f.C, ns+"-"+n, map[string]string{f.Label: "archive-storage"})
		f.Nodes = append(f.Nodes, ns+"-"+n)
	}
	f.Create(f.SeedCluster())
	f.WaitReady()
	f.SeedVolume()
	return f
}

// AdoptedReport plays a node agent that adopted every volume group of the LVMNode as it is.
func AdoptedReport(n *lvmv2.LVMNode) *lvmv2.LVMNodeStatus {
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

func (f *Fixture) DC(name string) string { return f.NS + "-" + name }

func (f *Fixture) SeedCluster() *lvmv1.LVMCluster {
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: f.Label, Operator: corev1.NodeSelectorOpIn, Values: []string{"archive-storage"}}}}}}
	return &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: ClusterName, Namespace: f.NS},
		Spec: lvmv1.LVMClusterSpec{Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{
			{Name: f.DC("vg1"), Default: true, NodeSelector: sel,
				DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/mapper/some-encrypted-device"}},
				ThinPoolConfig: &lvmv1.ThinPoolConfig{Name: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10}},
			{Name: f.DC("othervg"), FilesystemType: "ext4", NodeSelector: sel,
				DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/mapper/some-default-device"}}},
		}}}}
}

func (f *Fixture) Create(obj client.Object) {
	f.T.Helper()
	if err := f.C.Create(context.Background(), obj); err != nil {
		f.T.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (f *Fixture) Cluster() *lvmv1.LVMCluster {
	var cl lvmv1.LVMCluster
	if !optest.Get(f.T, f.C, client.ObjectKey{Namespace: f.NS, Name: ClusterName}, &cl) {
		return nil
	}
	return &cl
}

func (f *Fixture) WaitReady() {
	f.T.Helper()
	optest.Eventually(f.T, "the LVMCluster managing both nodes", func() (bool, string) {
		cl := f.Cluster()
		return cl != nil && cl.Status.ObservedGeneration == cl.Generation && len(cl.Status.DeviceClassStatuses) == 2 &&
			len(cl.Status.DeviceClassStatuses[0].NodeStatus) == 2 && len(cl.Status.DeviceClassStatuses[1].NodeStatus) == 2 &&
			cl.Status.DeviceClassStatuses[1].NodeStatus[1].Status != "", optest.Describe(cl.Status)
	})
	optest.Eventually(f.T, "both v1 node agents reporting both volume groups", func() (bool, string) {
		for _, n := range f.Nodes {
			var st lvmv1.LVMVolumeGroupNodeStatus
			if !optest.Get(f.T, f.C, client.ObjectKey{Namespace: f.NS, Name: n}, &st) || len(st.Spec.LVMVGStatus) != 2 {
				return false, optest.Describe(st.Spec)
			}
		}
		return true, ""
	})
	optest.Eventually(f.T, "the LVMCluster's StorageClasses", func() (bool, string) {
		var sc storagev1.StorageClass
		return optest.Get(f.T, f.C, client.ObjectKey{Name: "lvms-" + f.DC("vg1")}, &sc) &&
			optest.Get(f.T, f.C, client.ObjectKey{Name: "lvms-" + f.DC("othervg")}, &sc), ""
	})
}

// seedVolume plays a provisioned volume: a LogicalVolume and its PV on node a (no controller manager or
// CSI driver runs here).
func (f *Fixture) SeedVolume() {
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + f.NS},
		Spec: topolvmv1.LogicalVolumeSpec{Name: "pvc-" + f.NS, NodeName: f.Nodes[0], Size: resource.MustParse("1Gi"), DeviceClass: f.DC("vg1")}}
	f.Create(lv)
	f.T.Cleanup(func() { _ = f.C.Delete(context.Background(), lv) })
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + f.NS},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              "lvms-" + f.DC("vg1"),
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "topolvm.io", VolumeHandle: "pvc-" + f.NS}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.topolvm.io/node", Operator: corev1.NodeSelectorOpIn, Values: []string{f.Nodes[0]}}},
			}}}},
		}}
	f.Create(pv)
	f.T.Cleanup(func() { optest.DeletePV(f.T, f.C, pv) })
}

// plan plans the migration from the cluster, as lvms migrate does.
func (f *Fixture) Plan() *plan.Plan {
	f.T.Helper()
	p, err := handover.PlanFromCluster(context.Background(), f.C, f.NS, ClusterName)
	if err != nil {
		f.T.Fatalf("plan: %v", err)
	}
	return p
}

// unmarkAll removes the keep mark from the LVMCluster and the sets, so that the test's teardown removes
// what they generated.
func (f *Fixture) UnmarkAll() {
	ctx := context.Background()
	var sets lvmv2.LVMNodeSetList
	_ = f.C.List(ctx, &sets, client.InNamespace(f.NS))
	objs := []client.Object{}
	for i := range sets.Items {
		objs = append(objs, &sets.Items[i])
	}
	if cl := f.Cluster(); cl != nil {
		objs = append(objs, cl)
	}
	for _, o := range objs {
		patch := []byte(`{"metadata":{"annotations":{"` + names.KeepStorageOnDeleteAnnotation + `":null}}}`)
		_ = f.C.Patch(ctx, o, client.RawPatch(types.MergePatchType, patch))
	}
}
