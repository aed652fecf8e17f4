package console_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

// A node's view lists its group snapshots with their members, joined by the spec's member list and by the
// member label: each member with the volume and claim it snapshots, its size and whether it is ready.
func TestNode_GroupSnapshots(t *testing.T) {
	objs := consoletest.GroupSnapshots("lvms")
	// A LogicalVolume labelled as a member of the ready group that its spec does not name.
	stray := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "stray-member",
		Labels: map[string]string{topolvmv1.GroupSnapshotMemberLabel: consoletest.GroupReady}},
		Spec: topolvmv1.LogicalVolumeSpec{Name: "stray-member", NodeName: consoletest.NodeA, Source: "pvc-0c3", AccessType: "ro"}}
	snap := console.FromObjects(append(objs, stray), consoletest.At)
	v, err := console.Node(snap, consoletest.NodeA)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.GroupSnapshots) != 2 {
		t.Fatalf("worker-a has %d group snapshots, want 2: %+v", len(v.GroupSnapshots), v.GroupSnapshots)
	}
	failed, ready := v.GroupSnapshots[0], v.GroupSnapshots[1]
	if failed.Name != consoletest.GroupFailed || ready.Name != consoletest.GroupReady {
		t.Fatalf("groups %s, %s: want by name, failed first", failed.Name, ready.Name)
	}
	if ready.Phase != "Ready" || ready.Health != console.HealthOK || ready.VolumeGroupSnapshot != "lvms/"+consoletest.GroupVGS ||
		ready.SuspendTime == nil || *ready.SuspendTime != consoletest.GroupSuspend || ready.DeviceClass != "fast" {
		t.Errorf("ready group = %+v", ready)
	}
	if len(ready.Members) != 3 || ready.MembersReady() != 1 {
		t.Fatalf("ready group members = %+v, want the two of the spec and the stray one, one ready", ready.Members)
	}
	a, b, s := ready.Members[0], ready.Members[1], ready.Members[2]
	if a.Snapshot != consoletest.GroupMemberA || a.Source != "pvc-0a1" || a.SourcePVC != "lvms/data-db-0" || !a.Ready || !a.Exists ||
		a.Size == nil || a.Size.Value != 10<<30 || !a.Listed {
		t.Errorf("member a = %+v, want the ready snapshot of pvc-0a1 (claim lvms/data-db-0), 10 GiB", a)
	}
	if b.Snapshot != consoletest.GroupMemberB || b.Source != consoletest.GroupSourceB || b.SourcePVC != "" || b.Ready || !b.Exists {
		t.Errorf("member b = %+v, want the not yet ready snapshot of pvc-0a2, without a claim", b)
	}
	if s.Snapshot != "stray-member" || s.Listed || s.Source != "pvc-0c3" {
		t.Errorf("stray member = %+v, want it joined by its label, marked as not in the spec", s)
	}
	if failed.Phase != "Failed" || failed.Health != console.HealthError || failed.Reason != consoletest.GroupFailReason ||
		failed.Message != consoletest.GroupFailMsg || failed.SuspendTime != nil || failed.VolumeGroupSnapshot != "" {
		t.Errorf("failed group = %+v", failed)
	}
	if len(failed.Members) != 1 || failed.Members[0].Exists || failed.Members[0].Ready || failed.Members[0].Size != nil {
		t.Errorf("failed group's members = %+v, want its one member without a LogicalVolume", failed.Members)
	}
	if other, err := console.Node(snap, consoletest.NodeB); err != nil || len(other.GroupSnapshots) != 0 {
		t.Errorf("worker-b's group snapshots = %+v (err %v), want none", other, err)
	}
	for _, vol := range v.Volumes {
		if (vol.Name == consoletest.GroupMemberA || vol.Name == consoletest.GroupMemberB) && vol.Topic != nil {
			t.Errorf("member snapshot %s is flagged %q: a group's member has no PersistentVolume of its own", vol.Name, vol.Topic.Title)
		}
	}
	if all := console.GroupSnapshots(snap); len(all) != 2 {
		t.Errorf("GroupSnapshots = %d groups, want 2", len(all))
	}
}

// A cluster without group snapshots (or that does not serve them) shows none, and an empty phase is Pending.
func TestNode_GroupSnapshotsNoneAndPending(t *testing.T) {
	v, err := console.Node(console.FromObjects(consoletest.Prepared("lvms"), consoletest.At), consoletest.NodeA)
	if err != nil || v.GroupSnapshots != nil {
		t.Errorf("group snapshots without any = %+v (err %v)", v.GroupSnapshots, err)
	}
	g := &topolvmv1.LogicalVolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "new"},
		Spec: topolvmv1.LogicalVolumeGroupSnapshotSpec{NodeName: consoletest.NodeA, Members: []topolvmv1.GroupSnapshotMember{{Source: "pvc-0a1", Snapshot: "new-0a1"}}}}
	gs := console.GroupSnapshots(console.FromObjects(append(consoletest.Prepared("lvms"), g), consoletest.At))
	if len(gs) != 1 || gs[0].Phase != "Pending" || gs[0].Health != console.HealthInfo {
		t.Errorf("a new group = %+v, want Pending", gs)
	}
}
