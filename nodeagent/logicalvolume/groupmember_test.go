package logicalvolume_test

import (
	"testing"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// TestReconciler_LeavesGroupMembersToTheGroup: a snapshot LogicalVolume labelled as a group snapshot's
// member gets its finalizer (so deleting it removes its LV) but no LV of its own: a snapshot taken alone
// would not be consistent with the group's other members.
func TestReconciler_LeavesGroupMembersToTheGroup(t *testing.T) {
	src := newLV("src", "ssd-thin", 2*gib)
	member := newLV("member", "ssd-thin", 2*gib, func(l *topolvmv1.LogicalVolume) {
		l.Spec.Source, l.Spec.AccessType = "src", "ro"
		l.Labels = map[string]string{topolvmv1.GroupSnapshotMemberLabel: "group-1"}
	})
	n := newNode(t, driver.New(false), src, member)
	n.reconcile(t, "src")
	got := n.reconcile(t, "member")
	if got.Status.VolumeID != "" || got.Status.Code != 0 {
		t.Errorf("member status %+v, want untouched", got.Status)
	}
	if _, ok := n.sim.LV("myvg1", string(member.UID)); ok {
		t.Errorf("the LogicalVolume reconciler created the member's LV itself")
	}
	if len(got.Finalizers) == 0 {
		t.Errorf("member has no finalizer: deleting it would not remove its LV")
	}
}
