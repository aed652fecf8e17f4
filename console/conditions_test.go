package console

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// A node whose agent says Ready while a node-level condition is False is not shown Ready: its headline is
// Degraded with the condition's message, and the condition is a difference with its explanation. A False
// StorageClassesHealthy stays the class's difference and does not degrade the node.
func TestNode_HeadlineIsTheWorstCondition(t *testing.T) {
	s := sandboxOwners()
	n := &s.LVMNodes[0] // node-1, Ready
	meta.SetStatusCondition(&n.Status.Conditions, metav1.Condition{Type: lvmv2.ConditionDeviceClassesHealthy, Status: metav1.ConditionFalse,
		Reason: "ThinPoolMissing", Message: "device class vg1 cannot provision volumes"})
	v, err := Node(s, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if v.State != "Degraded" || !strings.Contains(v.Message, "device class vg1 cannot provision volumes") || v.Health == HealthOK {
		t.Errorf("headline %s %q (%s), want Degraded with the condition's message", v.State, v.Message, v.Health)
	}
	if len(v.Differences) == 0 || !strings.Contains(v.Differences[0].Actual, "DeviceClassesHealthy False") ||
		v.Differences[0].Explanation.Title == "" || len(v.Differences[0].Explanation.Next) == 0 {
		t.Errorf("first difference = %+v, want the False condition with its explanation and next step", v.Differences)
	}

	meta.SetStatusCondition(&n.Status.Conditions, metav1.Condition{Type: lvmv2.ConditionDeviceClassesHealthy, Status: metav1.ConditionTrue, Reason: "AllHealthy"})
	meta.SetStatusCondition(&n.Status.Conditions, metav1.Condition{Type: lvmv2.ConditionStorageClassesHealthy, Status: metav1.ConditionFalse,
		Reason: "ClassMissing", Message: "StorageClass lvms-vg1 does not exist"})
	if v, _ := Node(s, "node-1"); v.State != "Ready" {
		t.Errorf("with only a missing StorageClass the node is %s, want Ready (the class carries that difference)", v.State)
	}
}

// lvmd.yaml advice fits the node's mode: the host's file under ExternalConfiguration, the agent's otherwise.
func TestNode_LVMDAdviceFitsTheMode(t *testing.T) {
	s := sandboxOwners()
	c := metav1.Condition{Type: lvmv2.ConditionLVMDConfigured, Status: metav1.ConditionFalse, Reason: "Invalid", Message: "lvmd.yaml: bad key"}
	meta.SetStatusCondition(&s.NodeStatuses[2].Status.Conditions, c) // node-3, LVMCluster sandbox
	meta.SetStatusCondition(&s.LVMNodes[0].Status.Conditions, c)     // node-1, LVMNodeSet volumes
	advice := func(node string) string {
		v, err := Node(s, node)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range v.Conditions {
			if c.Type == lvmv2.ConditionLVMDConfigured && c.Explanation != nil && len(c.Explanation.Next) > 0 {
				return c.Explanation.Next[0].Text
			}
		}
		t.Fatalf("%s: no LVMDConfigured explanation", node)
		return ""
	}
	if a := advice("node-3"); strings.Contains(a, "host") {
		t.Errorf("managed v1 node gets host-file advice: %q", a)
	}
	s.LVMClusters[0].Spec.ConfigurationPolicy = lvmv1.ConfigurationPolicyExternal
	if a := advice("node-3"); !strings.Contains(a, "fix the host file") {
		t.Errorf("ExternalConfiguration node: %q, want the host file", a)
	}
	if a := advice("node-1"); strings.Contains(a, "host") {
		t.Errorf("v2 node gets host-file advice: %q", a)
	}
}
