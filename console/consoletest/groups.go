package consoletest

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// Names of the group snapshot state, for assertions.
const (
	// GroupReady is a Ready group on worker-a of two members: a snapshot of pvc-0a1 (claim data-db-0) and of
	// pvc-0a2 (no claim), taken for VolumeGroupSnapshot GroupVGS in the prepared namespace.
	GroupReady      = "groupsnapshot-ready"
	GroupVGS        = "db-group"
	GroupMemberA    = "groupsnapshot-ready-0a1"
	GroupMemberB    = "groupsnapshot-ready-0a2"
	GroupSourceB    = "pvc-0a2"
	GroupSuspend    = 120 * time.Millisecond
	GroupFailed     = "groupsnapshot-failed"
	GroupFailReason = "SuspendDeadline"
	GroupFailMsg    = "the origins stayed suspended longer than 5s: every origin was resumed and no snapshot kept; retry when the node is less busy"
)

// GroupSnapshots is the prepared state in namespace ns with group snapshots on worker-a: GroupReady with
// its two member snapshot LogicalVolumes, and GroupFailed, which failed and kept no member.
func GroupSnapshots(ns string) []client.Object {
	objs := Prepared(ns)
	lv := func(name, source, group, id string) *topolvmv1.LogicalVolume {
		l := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   topolvmv1.LogicalVolumeSpec{Name: name, NodeName: NodeA, DeviceClass: "fast", Size: *gi(10), Source: source, AccessType: "ro"},
			Status: topolvmv1.LogicalVolumeStatus{VolumeID: id, CurrentSize: gi(10)}}
		if group != "" {
			l.Labels = map[string]string{topolvmv1.GroupSnapshotMemberLabel: group}
		}
		return l
	}
	src := lv(GroupSourceB, "", "", "0a2-uuid")
	src.Spec.Source, src.Spec.AccessType = "", ""
	ready := &topolvmv1.LogicalVolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: GroupReady, Annotations: map[string]string{
			"topolvm.io/volume-group-snapshot-name": GroupVGS, "topolvm.io/volume-group-snapshot-namespace": ns}},
		Spec: topolvmv1.LogicalVolumeGroupSnapshotSpec{NodeName: NodeA, DeviceClass: "fast", Members: []topolvmv1.GroupSnapshotMember{
			{Source: "pvc-0a1", Snapshot: GroupMemberA}, {Source: GroupSourceB, Snapshot: GroupMemberB}}},
		Status: topolvmv1.LogicalVolumeGroupSnapshotStatus{Phase: topolvmv1.GroupSnapshotReady, SuspendTime: &metav1.Duration{Duration: GroupSuspend}}}
	failed := &topolvmv1.LogicalVolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: GroupFailed},
		Spec: topolvmv1.LogicalVolumeGroupSnapshotSpec{NodeName: NodeA, DeviceClass: "fast", Members: []topolvmv1.GroupSnapshotMember{
			{Source: "pvc-0a1", Snapshot: GroupFailed + "-0a1"}}},
		Status: topolvmv1.LogicalVolumeGroupSnapshotStatus{Phase: topolvmv1.GroupSnapshotFailed, Reason: GroupFailReason, Message: GroupFailMsg}}
	return append(objs, src, lv(GroupMemberA, "pvc-0a1", GroupReady, "snap-0a1-uuid"), lv(GroupMemberB, GroupSourceB, GroupReady, ""), ready, failed)
}
