package lvmcluster_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/api/nodeselect"
	"github.com/lvms-dev/lvms/operator/optest"
)

// TestLVMCluster_NodeLeavingTheSelectorKeepsTheVolumeGroupWithVolumes: a node that leaves a device class's
// node selector while a PV of its StorageClass lives there stays selected by the LVMVolumeGroup (so its agent
// keeps the volume group), and the LVMCluster names the claim; once the PV is gone the node is let go.
func TestLVMCluster_NodeLeavingTheSelectorKeepsTheVolumeGroupWithVolumes(t *testing.T) {
	f := newFixture(t, optest.V1Ready)
	node := f.node("a", "storage")
	f.node("b", "storage")
	f.create(f.cluster("lvms", "storage", "vg1"))
	f.waitState("lvms", lvmv1.LVMStatusReady, "")
	dc := f.ns + "-vg1"
	optest.Eventually(t, "the agent's finalizer of node a on the LVMVolumeGroup", func() (bool, string) {
		var vg lvmv1.LVMVolumeGroup
		ok := optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: dc}, &vg)
		return ok && strings.Contains(strings.Join(vg.Finalizers, " "), node.Name), optest.Describe(vg.Finalizers)
	})
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-pv"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              "lvms-" + dc,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: f.ns, Name: "data"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "topolvm.io", VolumeHandle: f.ns}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.topolvm.io/node", Operator: corev1.NodeSelectorOpIn, Values: []string{node.Name}}},
			}}}},
		},
	}
	f.create(pv)
	t.Cleanup(func() { optest.DeletePV(t, f.c, pv) })

	base := node.DeepCopy()
	node.Labels[f.label] = "compute"
	if err := f.c.Patch(context.Background(), node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	claim := "PersistentVolumeClaim " + f.ns + "/data"
	c := f.waitState("lvms", lvmv1.LVMStatusProgressing, claim)
	if cond := optest.Condition(c.Status.Conditions, "ResourcesAvailable"); cond == nil || cond.Status != metav1.ConditionFalse ||
		!strings.Contains(cond.Message, claim) || !strings.Contains(cond.Message, node.Name) {
		t.Errorf("ResourcesAvailable = %+v, want False naming %s on node %s", cond, claim, node.Name)
	}
	if !selects(t, f, dc, node.Name) {
		t.Errorf("the LVMVolumeGroup no longer selects node %s, which still holds a volume", node.Name)
	}
	optest.Eventually(t, "the node agent kept on the node", func() (bool, string) {
		return optest.AgentRunsOn(t, f.c, f.ns, node.Name), ""
	})

	optest.DeletePV(t, f.c, pv)
	optest.Eventually(t, "the node let go once its volume is gone", func() (bool, string) {
		c := f.get("lvms")
		return !selects(t, f, dc, node.Name) && c.Status.State == lvmv1.LVMStatusReady, optest.Describe(c.Status)
	})
}

// selects reports whether LVMVolumeGroup name selects the node, as its agent decides.
func selects(t *testing.T, f *fixture, name, node string) bool {
	t.Helper()
	var vg lvmv1.LVMVolumeGroup
	var n corev1.Node
	if !optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: name}, &vg) || !optest.Get(t, f.c, client.ObjectKey{Name: node}, &n) {
		t.Fatalf("LVMVolumeGroup %s or Node %s missing", name, node)
	}
	ok, err := nodeselect.Eligible(&n, vg.Spec.NodeSelector, nil)
	if err != nil {
		t.Fatalf("LVMVolumeGroup %s selector: %v", name, err)
	}
	return ok
}
