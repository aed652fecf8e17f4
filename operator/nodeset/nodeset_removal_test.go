package nodeset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/nodeset"
	"github.com/lvms-dev/lvms/operator/optest"
)

// pvOn is a PersistentVolume of storage class sc pinned to node, bound to claim ns/claim.
func pvOn(name, sc, node, ns, claim string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              sc,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "topolvm.io", VolumeHandle: name,
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.topolvm.io/node", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

// TestNodeSet_NodeLeavingTheSelectorKeepsVolumeGroupsWithVolumes: a node that leaves the selector while a PV
// of the set's storage class lives on it keeps the set's volume groups, and the set names the claim in its
// LVMNodesReady condition and a warning event; once the PV is gone the node is withdrawn.
func TestNodeSet_NodeLeavingTheSelectorKeepsVolumeGroupsWithVolumes(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	node := f.node("a", "storage")
	other := f.node("b", "storage")
	f.create(f.set("shrink", "storage", "vg1"))
	f.waitSetState("shrink", lvmv2.StateReady, "")
	scName := "lvms-" + f.ns + "-vg1"
	pv := pvOn(f.ns+"-pv", scName, node.Name, f.ns, "data")
	f.create(pv)
	t.Cleanup(func() { optest.DeletePV(t, f.c, pv) })
	// A PV of the same class on the node that stays blocks nothing.
	pvB := pvOn(f.ns+"-pv-b", scName, other.Name, f.ns, "other")
	f.create(pvB)
	t.Cleanup(func() { optest.DeletePV(t, f.c, pvB) })

	base := node.DeepCopy()
	node.Labels[f.label] = "compute"
	if err := f.c.Patch(context.Background(), node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	claim := "PersistentVolumeClaim " + f.ns + "/data"
	s := f.waitSetState("shrink", lvmv2.StateDegraded, claim)
	c := meta(s.Status.Conditions, lvmv2.ConditionLVMNodesReady)
	if c == nil || c.Reason != nodeset.ReasonRemovalBlocked || !strings.Contains(c.Message, claim) || !strings.Contains(c.Message, node.Name) {
		t.Errorf("LVMNodesReady = %+v, want reason %s naming %s on node %s", c, nodeset.ReasonRemovalBlocked, claim, node.Name)
	}
	if strings.Contains(s.Status.Message, "other") {
		t.Errorf("the set's message names the PV of the node that stays: %s", s.Status.Message)
	}
	n := f.getNode(node.Name)
	if n == nil || n.DeletionTimestamp != nil || len(n.Spec.VolumeGroups) != 1 || n.Spec.VolumeGroups[0].Name != "vg1" {
		t.Fatalf("the LVMNode of a node with a volume on it was withdrawn: %s", optest.Describe(n))
	}
	optest.Eventually(t, "the node agent kept on the node", func() (bool, string) {
		return optest.AgentRunsOn(t, f.c, f.ns, node.Name), ""
	})
	var events corev1.EventList
	optest.Eventually(t, "a "+nodeset.ReasonRemovalBlocked+" event naming the claim", func() (bool, string) {
		if err := f.c.List(context.Background(), &events, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Reason == nodeset.ReasonRemovalBlocked && e.InvolvedObject.Name == "shrink" && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Message, claim) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items))
	})

	optest.DeletePV(t, f.c, pv)
	optest.Eventually(t, "the LVMNode of the node that left removed once its volume is gone", func() (bool, string) {
		s := f.getSet("shrink")
		return f.getNode(node.Name) == nil && s.Status.DesiredNodes == 1 && s.Status.State == lvmv2.StateReady, optest.Describe(s.Status)
	})
	optest.Eventually(t, "the node agent gone from the node once the set let it go", func() (bool, string) {
		return !optest.AgentRunsOn(t, f.c, f.ns, node.Name), ""
	})
}

func meta(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
