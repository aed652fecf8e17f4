package nodeset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

// fixture is one test's namespace, operator and label that keeps its Nodes apart from other tests'.
type fixture struct {
	t     *testing.T
	ns    string
	c     client.Client
	label string
}

func newFixture(t *testing.T, report optest.Report) *fixture {
	return newFixtureWith(t, report, operator.Options{})
}

// newFixtureWith is newFixture with the operator started with opts (its namespace is the test's).
func newFixtureWith(t *testing.T, report optest.Report, opts operator.Options) *fixture {
	testenv.Require(t)
	ns := env.Namespace(t)
	f := &fixture{t: t, ns: ns, c: env.Client, label: "test.lvms.io/" + ns}
	opts.Namespace = ns
	optest.Start(t, env.Config, opts)
	if report != nil {
		optest.StartFakeAgent(t, env.Config, ns, report)
	}
	optest.CleanUpNamespace(t, env.Client, ns)
	return f
}

// node creates a Node of this test with the given role label value.
func (f *fixture) node(name, role string) *corev1.Node {
	return optest.Node(f.t, f.c, f.ns+"-"+name, map[string]string{f.label: role})
}

func (f *fixture) nodeName(name string) string { return f.ns + "-" + name }

// set builds an LVMNodeSet selecting this test's Nodes with role, with one thick device class per volume
// group on an explicit device.
func (f *fixture) set(name, role string, vgs ...string) *lvmv2.LVMNodeSet {
	s := &lvmv2.LVMNodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: f.label, Operator: corev1.NodeSelectorOpIn, Values: []string{role}}},
			}}},
		},
	}
	for _, vg := range vgs {
		s.Spec.Template.VolumeGroups = append(s.Spec.Template.VolumeGroups, lvmv2.VolumeGroup{
			Name: vg,
			DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{
				MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: []string{"/dev/" + vg + "-disk"}}},
			}}},
		})
		s.Spec.Template.DeviceClasses = append(s.Spec.Template.DeviceClasses, lvmv2.DeviceClass{
			Name: f.ns + "-" + vg, Strategy: lvmv2.StrategyThick, VolumeGroup: vg,
		})
	}
	return s
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := f.c.Create(context.Background(), obj); err != nil {
		f.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (f *fixture) getSet(name string) *lvmv2.LVMNodeSet {
	f.t.Helper()
	var s lvmv2.LVMNodeSet
	if !optest.Get(f.t, f.c, client.ObjectKey{Namespace: f.ns, Name: name}, &s) {
		return nil
	}
	return &s
}

func (f *fixture) getNode(name string) *lvmv2.LVMNode {
	f.t.Helper()
	var n lvmv2.LVMNode
	if !optest.Get(f.t, f.c, client.ObjectKey{Namespace: f.ns, Name: name}, &n) {
		return nil
	}
	return &n
}

// waitSetState waits until the set has state and its message contains want.
func (f *fixture) waitSetState(name string, state lvmv2.State, want string) *lvmv2.LVMNodeSet {
	f.t.Helper()
	var got *lvmv2.LVMNodeSet
	optest.Eventually(f.t, fmt.Sprintf("LVMNodeSet %s to be %s with %q", name, state, want), func() (bool, string) {
		got = f.getSet(name)
		if got == nil {
			return false, "no such set"
		}
		return got.Status.State == state && strings.Contains(got.Status.Message, want) &&
			got.Status.ObservedGeneration == got.Generation, optest.Describe(got.Status)
	})
	return got
}

func vgNames(n *lvmv2.LVMNode) []string {
	var out []string
	for _, vg := range n.Spec.VolumeGroups {
		out = append(out, vg.Name)
	}
	return out
}

func TestNodeSet_CreateBecomesReady(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	f.node("a", "storage")
	f.node("b", "storage")
	f.node("other", "compute")
	f.create(f.set("fast", "storage", "vg1"))

	set := f.waitSetState("fast", lvmv2.StateReady, "")
	if set.Status.DesiredNodes != 2 || set.Status.ReadyNodes != 2 {
		t.Errorf("desired/ready = %d/%d, want 2/2", set.Status.DesiredNodes, set.Status.ReadyNodes)
	}
	want := []string{f.nodeName("a"), f.nodeName("b")}
	if len(set.Status.Nodes) != 2 || set.Status.Nodes[0].Name != want[0] || set.Status.Nodes[1].Name != want[1] {
		t.Errorf("status.nodes = %+v, want %v sorted", set.Status.Nodes, want)
	}
	for _, ct := range []string{lvmv2.ConditionLVMNodesReady, lvmv2.ConditionProviderReady, lvmv2.ConditionNoConflicts} {
		c := optest.Condition(set.Status.Conditions, ct)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != set.Generation {
			t.Errorf("condition %s = %+v, want True at generation %d", ct, c, set.Generation)
		}
	}
	for _, name := range want {
		n := f.getNode(name)
		if n == nil {
			t.Fatalf("no LVMNode %s", name)
		}
		if got := vgNames(n); len(got) != 1 || got[0] != "vg1" {
			t.Errorf("LVMNode %s volume groups = %v, want [vg1]", name, got)
		}
		if n.Labels[names.NodeSetLabel("fast")] != "true" || len(n.OwnerReferences) != 1 || n.OwnerReferences[0].Name != "fast" {
			t.Errorf("LVMNode %s labels %v owners %+v, want the set's label and owner reference", name, n.Labels, n.OwnerReferences)
		}
	}
	if f.getNode(f.nodeName("other")) != nil {
		t.Errorf("LVMNode created for a node the selector does not match")
	}
	var sc storagev1.StorageClass
	if !optest.Get(t, f.c, client.ObjectKey{Name: "lvms-" + f.ns + "-vg1"}, &sc) {
		t.Fatalf("StorageClass lvms-%s-vg1 missing", f.ns)
	}
	if sc.Provisioner != "topolvm.io" || sc.Parameters["topolvm.io/device-class"] != f.ns+"-vg1" ||
		sc.Parameters[names.FSTypeParameter] != "xfs" || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer ||
		sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		t.Errorf("StorageClass = %+v", sc)
	}
	var ds appsv1.DaemonSet
	if !optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: names.NodeAgent}, &ds) {
		t.Fatalf("node agent DaemonSet missing")
	}
	if !ds.Spec.Template.Spec.HostPID || !*ds.Spec.Template.Spec.Containers[0].SecurityContext.Privileged {
		t.Errorf("DaemonSet pod spec = %+v, want hostPID and privileged", ds.Spec.Template.Spec)
	}
	var driver storagev1.CSIDriver
	if !optest.Get(t, f.c, client.ObjectKey{Name: "topolvm.io"}, &driver) || *driver.Spec.AttachRequired || !*driver.Spec.StorageCapacity {
		t.Errorf("CSIDriver = %+v, want attachRequired false and storageCapacity true", driver.Spec)
	}
}

func TestNodeSet_AddedNodeGetsLVMNode(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	f.node("a", "storage")
	f.create(f.set("grow", "storage", "vg1"))
	f.waitSetState("grow", lvmv2.StateReady, "")

	f.node("b", "storage")
	optest.Eventually(t, "the new node's LVMNode and the set Ready with 2 nodes", func() (bool, string) {
		s := f.getSet("grow")
		return f.getNode(f.nodeName("b")) != nil && s.Status.State == lvmv2.StateReady && s.Status.ReadyNodes == 2, optest.Describe(s.Status)
	})
}

func TestNodeSet_DegradedNodeIsNamed(t *testing.T) {
	missing := "/dev/vg1-disk"
	f := newFixture(t, func(n *lvmv2.LVMNode) *lvmv2.LVMNodeStatus {
		st := optest.ReportReady(n)
		if strings.HasSuffix(n.Name, "-bad") {
			st.State = lvmv2.StateDegraded
			st.Message = "required device " + missing + " was not found"
			st.VolumeGroups[0].State = lvmv2.StateFailed
			st.VolumeGroups[0].Message = missing + " was not found"
		}
		return st
	})
	f.node("good", "storage")
	f.node("bad", "storage")
	f.create(f.set("mixed", "storage", "vg1"))

	var set *lvmv2.LVMNodeSet
	optest.Eventually(t, "the set Degraded by the bad node only", func() (bool, string) {
		set = f.getSet("mixed")
		return set.Status.State == lvmv2.StateDegraded && set.Status.ReadyNodes == 1 &&
			strings.Contains(set.Status.Message, f.nodeName("bad")), optest.Describe(set.Status)
	})
	if !strings.Contains(set.Status.Message, missing) {
		t.Errorf("message %q does not name the missing path %s", set.Status.Message, missing)
	}
	if set.Status.ReadyNodes != 1 || set.Status.DesiredNodes != 2 {
		t.Errorf("desired/ready = %d/%d, want 2/1", set.Status.DesiredNodes, set.Status.ReadyNodes)
	}
	c := optest.Condition(set.Status.Conditions, lvmv2.ConditionLVMNodesReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NodesNotReady" {
		t.Errorf("LVMNodesReady = %+v, want False NodesNotReady", c)
	}
}

func TestNodeSet_NodeWithoutAgentIsNotProgressingForever(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	f := &fixture{t: t, ns: ns, c: env.Client, label: "test.lvms.io/" + ns}
	optest.Start(t, env.Config, operator.Options{Namespace: ns, AgentReportTimeout: 2e9})
	optest.CleanUpNamespace(t, env.Client, ns)
	f.node("silent", "storage")
	f.create(f.set("quiet", "storage", "vg1"))
	f.waitSetState("quiet", lvmv2.StateDegraded, "the node agent has not reported")
}

func TestNodeSet_OverlapIsAConflictOnBoth(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	f.node("a", "storage")
	f.create(f.set("first", "storage", "vg1"))
	f.waitSetState("first", lvmv2.StateReady, "")
	before := f.getNode(f.nodeName("a"))

	second := f.set("second", "storage", "vg1")
	second.Spec.Template.DeviceClasses[0].Name = f.ns + "-other"
	f.create(second)

	f.waitSetState("second", lvmv2.StateConflict, "LVMNodeSet first already manages node "+f.nodeName("a")+" (volume group vg1")
	f.waitSetState("first", lvmv2.StateConflict, "LVMNodeSet second also claims node "+f.nodeName("a"))
	optest.Eventually(t, "the LVMNode's NoConflicts condition", func() (bool, string) {
		n := f.getNode(f.nodeName("a"))
		c := optest.Condition(n.Status.Conditions, lvmv2.ConditionNoConflicts)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "LVMNodeSet second"), optest.Describe(n.Status.Conditions)
	})
	after := f.getNode(f.nodeName("a"))
	if after.Generation != before.Generation || len(after.OwnerReferences) != 1 || after.OwnerReferences[0].Name != "first" {
		t.Errorf("LVMNode changed: generation %d -> %d, owners %+v", before.Generation, after.Generation, after.OwnerReferences)
	}
	if len(after.Spec.DeviceClasses) != 1 || after.Spec.DeviceClasses[0].Name != f.ns+"-vg1" {
		t.Errorf("device classes = %+v, want only the first set's", after.Spec.DeviceClasses)
	}
	var events corev1.EventList
	optest.Eventually(t, "a Conflict event on the second set", func() (bool, string) {
		if err := f.c.List(context.Background(), &events, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Reason == "Conflict" && e.InvolvedObject.Name == "second" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items))
	})

	// Resolving the overlap clears the conflict on both.
	if err := f.c.Delete(context.Background(), f.getSet("second")); err != nil {
		t.Fatal(err)
	}
	f.waitSetState("first", lvmv2.StateReady, "")
}

func TestNodeSet_SharedNodeMergesTemplates(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	f.node("a", "storage")
	f.create(f.set("one", "storage", "vg1"))
	f.create(f.set("two", "storage", "vg2"))
	f.waitSetState("one", lvmv2.StateReady, "")
	f.waitSetState("two", lvmv2.StateReady, "")
	n := f.getNode(f.nodeName("a"))
	if got := vgNames(n); len(got) != 2 {
		t.Fatalf("volume groups = %v, want vg1 and vg2 from both sets", got)
	}

	// Set "two" leaves: only its volume group goes, the LVMNode stays with "one".
	if err := f.c.Delete(context.Background(), f.getSet("two")); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "set two gone and the LVMNode holding only vg1", func() (bool, string) {
		n := f.getNode(f.nodeName("a"))
		return f.getSet("two") == nil && n != nil && len(n.Spec.VolumeGroups) == 1 && n.Spec.VolumeGroups[0].Name == "vg1" &&
			len(n.OwnerReferences) == 1, optest.Describe(n)
	})
}

func TestNodeSet_DeletionWaitsForPVCs(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	f.node("a", "storage")
	f.create(f.set("busy", "storage", "vg1"))
	f.waitSetState("busy", lvmv2.StateReady, "")
	scName := "lvms-" + f.ns + "-vg1"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: f.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &scName,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	f.create(pvc)
	if err := f.c.Delete(context.Background(), f.getSet("busy")); err != nil {
		t.Fatal(err)
	}
	f.waitSetState("busy", lvmv2.StateDeleting, "PersistentVolumeClaim "+f.ns+"/data ("+scName+")")
	if f.getNode(f.nodeName("a")) == nil {
		t.Errorf("LVMNode removed while a PVC still uses the set's storage class")
	}
	var sc storagev1.StorageClass
	if !optest.Get(t, f.c, client.ObjectKey{Name: scName}, &sc) {
		t.Errorf("StorageClass removed while a PVC still uses it")
	}

	// The PVC goes; the test plays kube-controller-manager, which drops the PVC protection finalizer.
	optest.DeleteVolume(t, f.c, pvc)
	optest.Eventually(t, "the set, its LVMNode, StorageClass and driver objects gone", func() (bool, string) {
		var ds appsv1.DaemonSet
		gone := f.getSet("busy") == nil && f.getNode(f.nodeName("a")) == nil &&
			!optest.Get(t, f.c, client.ObjectKey{Name: scName}, &sc) &&
			!optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: names.NodeAgent}, &ds)
		return gone, fmt.Sprintf("set %v, LVMNode %v", f.getSet("busy") != nil, f.getNode(f.nodeName("a")) != nil)
	})
}

func TestNodeSet_NodeLeavingTheSelectorIsWithdrawnAfterTheAgent(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	node := f.node("a", "storage")
	f.node("b", "storage")
	f.create(f.set("shrink", "storage", "vg1"))
	f.waitSetState("shrink", lvmv2.StateReady, "")

	base := node.DeepCopy()
	node.Labels[f.label] = "compute"
	if err := f.c.Patch(context.Background(), node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the LVMNode of the node that left to be removed", func() (bool, string) {
		n := f.getNode(node.Name)
		s := f.getSet("shrink")
		return n == nil && s.Status.DesiredNodes == 1 && s.Status.State == lvmv2.StateReady, optest.Describe(s.Status)
	})
}

func TestNodeSet_DeletedNodeLeavesNothing(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	node := f.node("a", "storage")
	f.node("b", "storage")
	f.create(f.set("gone", "storage", "vg1"))
	f.waitSetState("gone", lvmv2.StateReady, "")
	// An agent finalizer that only a running agent would remove.
	n := f.getNode(node.Name)
	base := n.DeepCopy()
	n.Finalizers = append(n.Finalizers, "lvm.topolvm.io/node-agent")
	if err := f.c.Patch(context.Background(), n, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the deleted node's LVMNode gone and the set Ready with one node", func() (bool, string) {
		s := f.getSet("gone")
		return f.getNode(node.Name) == nil && s.Status.DesiredNodes == 1 && s.Status.State == lvmv2.StateReady, optest.Describe(s.Status)
	})
}
