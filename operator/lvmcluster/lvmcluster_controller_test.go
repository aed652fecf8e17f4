package lvmcluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

type fixture struct {
	t     *testing.T
	ns    string
	c     client.Client
	label string
}

func newFixture(t *testing.T, report optest.V1Report) *fixture {
	testenv.Require(t)
	ns := env.Namespace(t)
	f := &fixture{t: t, ns: ns, c: env.Client, label: "test.lvms.io/" + ns}
	optest.Start(t, env.Config, operator.Options{Namespace: ns})
	if report != nil {
		optest.StartFakeV1Agent(t, env.Config, ns, report)
	}
	optest.CleanUpNamespace(t, env.Client, ns)
	return f
}

func (f *fixture) node(name, role string) *corev1.Node {
	return optest.Node(f.t, f.c, f.ns+"-"+name, map[string]string{f.label: role})
}

func (f *fixture) nodeName(name string) string { return f.ns + "-" + name }

func (f *fixture) selector(role string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: f.label, Operator: corev1.NodeSelectorOpIn, Values: []string{role}}},
	}}}
}

// cluster builds an LVMCluster with one thick device class per name, on nodes with role.
func (f *fixture) cluster(name, role string, classes ...string) *lvmv1.LVMCluster {
	c := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}}
	for _, dc := range classes {
		c.Spec.Storage.DeviceClasses = append(c.Spec.Storage.DeviceClasses, lvmv1.DeviceClass{
			Name:           f.ns + "-" + dc,
			NodeSelector:   f.selector(role),
			DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{lvmv1.DevicePath("/dev/" + dc + "-disk")}},
		})
	}
	return c
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := f.c.Create(context.Background(), obj); err != nil {
		f.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (f *fixture) get(name string) *lvmv1.LVMCluster {
	f.t.Helper()
	var c lvmv1.LVMCluster
	if !optest.Get(f.t, f.c, client.ObjectKey{Namespace: f.ns, Name: name}, &c) {
		return nil
	}
	return &c
}

func (f *fixture) waitState(name string, state lvmv1.LVMStateType, want string) *lvmv1.LVMCluster {
	f.t.Helper()
	var got *lvmv1.LVMCluster
	optest.Eventually(f.t, fmt.Sprintf("LVMCluster %s to be %s with %q", name, state, want), func() (bool, string) {
		got = f.get(name)
		if got == nil {
			return false, "no such LVMCluster"
		}
		return got.Status.State == state && strings.Contains(got.Status.Message, want) && got.Status.ObservedGeneration == got.Generation,
			optest.Describe(got.Status)
	})
	return got
}

func TestLVMCluster_CreateBecomesReady(t *testing.T) {
	f := newFixture(t, optest.V1Ready)
	f.node("a", "storage")
	f.node("b", "storage")
	f.node("c", "compute")
	f.create(f.cluster("lvms", "storage", "vg1"))

	c := f.waitState("lvms", lvmv1.LVMStatusReady, "")
	if !c.Status.Ready {
		t.Errorf("status.ready = false with state Ready")
	}
	dc := f.ns + "-vg1"
	if len(c.Status.DeviceClassStatuses) != 1 || c.Status.DeviceClassStatuses[0].Name != dc || len(c.Status.DeviceClassStatuses[0].NodeStatus) != 2 {
		t.Fatalf("deviceClassStatuses = %+v, want %s on two nodes", c.Status.DeviceClassStatuses, dc)
	}
	for i, want := range []string{f.nodeName("a"), f.nodeName("b")} {
		ns := c.Status.DeviceClassStatuses[0].NodeStatus[i]
		if ns.Node != want || ns.Status != lvmv1.VGStatusReady {
			t.Errorf("nodeStatus[%d] = %+v, want %s Ready", i, ns, want)
		}
	}
	for _, ct := range []string{"ResourcesAvailable", "VolumeGroupsReady", "NoConflicts"} {
		cond := optest.Condition(c.Status.Conditions, ct)
		if cond == nil || cond.Status != metav1.ConditionTrue {
			t.Errorf("condition %s = %+v, want True", ct, cond)
		}
	}
	var vg lvmv1.LVMVolumeGroup
	if !optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: dc}, &vg) {
		t.Fatalf("LVMVolumeGroup %s missing", dc)
	}
	if !vg.Spec.Default || vg.Spec.FilesystemType != lvmv1.FilesystemXFS || vg.Spec.DeviceAccessPolicy != lvmv1.DeviceAccessPolicyNodeLocal || metav1.GetControllerOf(&vg).Name != "lvms" {
		t.Errorf("LVMVolumeGroup spec = %+v owner %+v", vg.Spec, vg.OwnerReferences)
	}
	for _, n := range []string{"a", "b"} {
		var st lvmv1.LVMVolumeGroupNodeStatus
		if !optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: f.nodeName(n)}, &st) {
			t.Errorf("LVMVolumeGroupNodeStatus of %s missing", n)
		}
	}
	var st lvmv1.LVMVolumeGroupNodeStatus
	if optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: f.nodeName("c")}, &st) {
		t.Errorf("LVMVolumeGroupNodeStatus created for an unselected node")
	}
	var sc storagev1.StorageClass
	if !optest.Get(t, f.c, client.ObjectKey{Name: "lvms-" + dc}, &sc) || sc.Annotations[names.DefaultClassAnnotation] == "" {
		t.Errorf("StorageClass lvms-%s = %+v", dc, sc.ObjectMeta)
	}
}

func TestLVMCluster_SecondIsRefused(t *testing.T) {
	f := newFixture(t, optest.V1Ready)
	f.node("a", "storage")
	f.create(f.cluster("first", "storage", "vg1"))
	f.waitState("first", lvmv1.LVMStatusReady, "")
	// "second" is created later or, within the API server's one-second resolution, sorts after "first" by
	// name: the inventory's order (creation time, then name) makes "first" the managed one either way.
	f.create(f.cluster("second", "storage", "vg2"))
	c := f.waitState("second", lvmv1.LVMStatusFailed, "only one LVMCluster per namespace is supported and LVMCluster first is the one managed here")
	if cond := optest.Condition(c.Status.Conditions, "ResourcesAvailable"); cond == nil || cond.Reason != "MultipleLVMClusters" {
		t.Errorf("ResourcesAvailable = %+v, want reason MultipleLVMClusters", cond)
	}
	var vg lvmv1.LVMVolumeGroup
	if optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: f.ns + "-vg2"}, &vg) {
		t.Errorf("the refused LVMCluster got an LVMVolumeGroup")
	}
	f.waitState("first", lvmv1.LVMStatusReady, "")
}

func TestLVMCluster_DegradedNodeIsNamed(t *testing.T) {
	f := newFixture(t, func(node string, vg *lvmv1.LVMVolumeGroup) lvmv1.VGStatus {
		if strings.HasSuffix(node, "-bad") {
			return lvmv1.VGStatus{Name: vg.Name, Status: lvmv1.VGStatusFailed, Reason: "mandatory device path /dev/vg1-disk was not found"}
		}
		return optest.V1Ready(node, vg)
	})
	f.node("good", "storage")
	f.node("bad", "storage")
	f.create(f.cluster("lvms", "storage", "vg1"))
	c := f.waitState("lvms", lvmv1.LVMStatusDegraded, f.nodeName("bad")+": mandatory device path /dev/vg1-disk was not found")
	if cond := optest.Condition(c.Status.Conditions, "VolumeGroupsReady"); cond == nil || cond.Reason != "VGsDegraded" {
		t.Errorf("VolumeGroupsReady = %+v, want VGsDegraded", cond)
	}
}

func TestLVMCluster_ExternalConfigurationReportsTheHostFile(t *testing.T) {
	f := newFixture(t, nil)
	f.node("a", "storage")
	c := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "microshift", Namespace: f.ns},
		Spec: lvmv1.LVMClusterSpec{ConfigurationPolicy: lvmv1.ConfigurationPolicyExternal}}
	f.create(c)
	var st lvmv1.LVMVolumeGroupNodeStatus
	optest.Eventually(t, "the node status of node a", func() (bool, string) {
		return optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: f.nodeName("a")}, &st), ""
	})
	f.waitState("microshift", lvmv1.LVMStatusProgressing, "0 of")
	// Play the agent: it read /etc/topolvm/lvmd.yaml on the host and found one device class.
	base := st.DeepCopy()
	st.Spec.LVMVGStatus = []lvmv1.VGStatus{{Name: "rhel", Status: lvmv1.VGStatusReady, Devices: []string{"/dev/sdb"}}}
	if err := f.c.Patch(context.Background(), &st, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	got := f.waitState("microshift", lvmv1.LVMStatusReady, "")
	if len(got.Status.DeviceClassStatuses) != 1 || got.Status.DeviceClassStatuses[0].Name != "rhel" {
		t.Errorf("deviceClassStatuses = %+v, want the host file's rhel", got.Status.DeviceClassStatuses)
	}
	if cond := optest.Condition(got.Status.Conditions, "VolumeGroupsReady"); cond == nil || cond.Reason != "VGsUnmanaged" {
		t.Errorf("VolumeGroupsReady = %+v, want VGsUnmanaged", cond)
	}
	var vgs lvmv1.LVMVolumeGroupList
	if err := f.c.List(context.Background(), &vgs, client.InNamespace(f.ns)); err != nil || len(vgs.Items) != 0 {
		t.Errorf("LVMVolumeGroups = %d (%v), want none with external configuration", len(vgs.Items), err)
	}
	var scs storagev1.StorageClassList
	if err := f.c.List(context.Background(), &scs, client.MatchingLabels{names.OwnerNamespaceLabel: f.ns}); err != nil || len(scs.Items) != 0 {
		t.Errorf("StorageClasses = %d (%v), want none with external configuration", len(scs.Items), err)
	}
}

func TestLVMCluster_NodeClaimedByBothAPIsIsAConflict(t *testing.T) {
	testenv.Require(t)
	f := newFixture(t, optest.V1Ready)
	optest.StartFakeAgent(t, env.Config, f.ns, optest.ReportReady)
	f.node("v1", "v1")
	f.node("both", "both")
	cluster := f.cluster("lvms", "v1", "vg1")
	cluster.Spec.Storage.DeviceClasses[0].NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"v1", "both"}
	f.create(cluster)
	f.waitState("lvms", lvmv1.LVMStatusReady, "")

	set := &lvmv2.LVMNodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: "v2", Namespace: f.ns},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: f.selector("both"),
			Template: lvmv2.LVMNodeSpec{VolumeGroups: []lvmv2.VolumeGroup{{Name: "vgx", DeviceSelector: lvmv2.DeviceSelector{
				DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: []string{"/dev/x"}}}}},
			}}}},
		},
	}
	f.create(set)
	both := f.nodeName("both")
	optest.Eventually(t, "the set to report the conflict and leave the node alone", func() (bool, string) {
		var s lvmv2.LVMNodeSet
		optest.Get(t, f.c, client.ObjectKeyFromObject(set), &s)
		return s.Status.State == lvmv2.StateConflict && strings.Contains(s.Status.Message, "LVMCluster lvms already manages node "+both), optest.Describe(s.Status)
	})
	c := f.waitState("lvms", lvmv1.LVMStatusDegraded, "LVMNodeSet v2 also claims node "+both)
	if cond := optest.Condition(c.Status.Conditions, "NoConflicts"); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("NoConflicts = %+v, want False", cond)
	}
	var n lvmv2.LVMNode
	if optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: both}, &n) {
		t.Errorf("an LVMNode was created for a node the LVMCluster manages")
	}
	// The node stays in the v1 volume group: nothing was overwritten.
	var vg lvmv1.LVMVolumeGroup
	optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: f.ns + "-vg1"}, &vg)
	if ns := c.Status.DeviceClassStatuses[0].NodeStatus; len(ns) != 2 {
		t.Errorf("the LVMCluster lost a node to the conflict: %+v", ns)
	}
}

func TestLVMCluster_DeletionWaitsForPVCsThenRemovesEverything(t *testing.T) {
	f := newFixture(t, optest.V1Ready)
	f.node("a", "storage")
	f.create(f.cluster("lvms", "storage", "vg1"))
	f.waitState("lvms", lvmv1.LVMStatusReady, "")
	sc := "lvms-" + f.ns + "-vg1"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: f.ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	f.create(pvc)
	if err := f.c.Delete(context.Background(), f.get("lvms")); err != nil {
		t.Fatal(err)
	}
	c := f.waitState("lvms", lvmv1.LVMStatusProgressing, "PersistentVolumeClaim "+f.ns+"/db ("+sc+")")
	if cond := optest.Condition(c.Status.Conditions, "ResourcesAvailable"); cond == nil || cond.Reason != "DeletionPending" {
		t.Errorf("ResourcesAvailable = %+v, want DeletionPending", cond)
	}
	var vg lvmv1.LVMVolumeGroup
	if !optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: f.ns + "-vg1"}, &vg) {
		t.Errorf("LVMVolumeGroup deleted while a PVC uses its class")
	}
	optest.DeleteVolume(t, f.c, pvc)
	optest.Eventually(t, "the LVMCluster and everything it generated gone", func() (bool, string) {
		var st lvmv1.LVMVolumeGroupNodeStatus
		var s storagev1.StorageClass
		left := map[string]bool{
			"cluster":    f.get("lvms") != nil,
			"vg":         optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: f.ns + "-vg1"}, &vg),
			"nodestatus": optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: f.nodeName("a")}, &st),
			"sc":         optest.Get(t, f.c, client.ObjectKey{Name: sc}, &s),
		}
		for _, v := range left {
			if v {
				return false, fmt.Sprint(left)
			}
		}
		return true, ""
	})
}

func TestLVMCluster_DeletedNodeLeavesNothing(t *testing.T) {
	f := newFixture(t, optest.V1Ready)
	gone := f.node("gone", "storage")
	f.node("stays", "storage")
	f.create(f.cluster("lvms", "storage", "vg1"))
	f.waitState("lvms", lvmv1.LVMStatusReady, "")
	vgKey := client.ObjectKey{Namespace: f.ns, Name: f.ns + "-vg1"}
	var vg lvmv1.LVMVolumeGroup
	optest.Eventually(t, "both agents' finalizers on the volume group", func() (bool, string) {
		optest.Get(t, f.c, vgKey, &vg)
		return len(vg.Finalizers) == 2, fmt.Sprint(vg.Finalizers)
	})
	if err := f.c.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the deleted node's status and finalizer gone, the cluster Ready on one node", func() (bool, string) {
		var st lvmv1.LVMVolumeGroupNodeStatus
		optest.Get(t, f.c, vgKey, &vg)
		c := f.get("lvms")
		return !optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: gone.Name}, &st) &&
				len(vg.Finalizers) == 1 && vg.Finalizers[0] == optest.V1FinalizerPrefix+f.nodeName("stays") &&
				c.Status.State == lvmv1.LVMStatusReady && len(c.Status.DeviceClassStatuses[0].NodeStatus) == 1,
			fmt.Sprint(vg.Finalizers, c.Status)
	})
}
