package console

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
