package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot/reconciler"
)

const gib = int64(1) << 30

// engine records the requests and answers err; recovers counts Recover calls.
type engine struct {
	taken    []groupsnapshot.Request
	err      error
	recovers int
}

func (e *engine) Take(_ context.Context, req groupsnapshot.Request) (groupsnapshot.Result, error) {
	e.taken = append(e.taken, req)
	if e.err != nil {
		return groupsnapshot.Result{}, e.err
	}
	return groupsnapshot.Result{Snapshots: req.Members, Suspended: 7 * time.Millisecond}, nil
}

func (e *engine) Recover(context.Context) error { e.recovers++; return nil }

func lv(name, node, source string, mutate ...func(*topolvmv1.LogicalVolume)) *topolvmv1.LogicalVolume {
	size := resource.NewQuantity(gib, resource.BinarySI)
	o := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: topolvmv1.LogicalVolumeSpec{Name: name, NodeName: node, DeviceClass: "thin", Size: *size, Source: source}}
	if source == "" {
		o.Status = topolvmv1.LogicalVolumeStatus{VolumeID: "uid-" + name, CurrentSize: size}
	} else {
		o.Spec.AccessType = "ro"
		o.Labels = map[string]string{topolvmv1.GroupSnapshotMemberLabel: "g"}
	}
	for _, m := range mutate {
		m(o)
	}
	return o
}

func group(node string) *topolvmv1.LogicalVolumeGroupSnapshot {
	return &topolvmv1.LogicalVolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "g", UID: "group-uid"},
		Spec: topolvmv1.LogicalVolumeGroupSnapshotSpec{NodeName: node, DeviceClass: "thin", Members: []topolvmv1.GroupSnapshotMember{
			{Source: "db", Snapshot: "g-db"}, {Source: "wal", Snapshot: "g-wal"}}}}
}

func run(t *testing.T, e *engine, thin bool, objs ...client.Object) client.Client {
	t.Helper()
	scheme, err := driver.New(false).Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&topolvmv1.LogicalVolume{}, &topolvmv1.LogicalVolumeGroupSnapshot{}).
		WithObjects(objs...).Build()
	r := reconciler.New(c, reconciler.Options{NodeName: "node-a", Engine: e,
		VolumeGroup: func(dc string) (string, bool, error) {
			if dc != "thin" {
				return "", false, errors.New("no such device class")
			}
			return "vg", thin, nil
		}})
	for range 2 {
		_, _ = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "g"}})
	}
	return c
}

func get[T client.Object](t *testing.T, c client.Client, name string, obj T) T {
	t.Helper()
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestReconcile_TakesTheGroupOnce: one request naming every origin and the members' uids, the members get a
// volume ID and size as single snapshots do, the group is Ready with its suspend time, and a second pass
// takes nothing.
func TestReconcile_TakesTheGroupOnce(t *testing.T) {
	e := &engine{}
	c := run(t, e, true, group("node-a"), lv("db", "node-a", ""), lv("wal", "node-a", ""), lv("g-db", "node-a", "db"), lv("g-wal", "node-a", "wal"))
	if len(e.taken) != 1 || e.taken[0].ID != "group-uid" || len(e.taken[0].Members) != 2 ||
		e.taken[0].Members[0] != (groupsnapshot.Member{VG: "vg", Origin: "uid-db", Snapshot: "uid-g-db"}) ||
		e.taken[0].Members[1] != (groupsnapshot.Member{VG: "vg", Origin: "uid-wal", Snapshot: "uid-g-wal"}) {
		t.Fatalf("engine requests %+v", e.taken)
	}
	if e.recovers != 1 {
		t.Errorf("Recover ran %d times before the first group, want once", e.recovers)
	}
	for _, name := range []string{"g-db", "g-wal"} {
		m := get(t, c, name, &topolvmv1.LogicalVolume{})
		if m.Status.VolumeID != "uid-"+name || m.Status.CurrentSize == nil || m.Status.CurrentSize.Value() != gib {
			t.Errorf("member %s status %+v", name, m.Status)
		}
	}
	g := get(t, c, "g", &topolvmv1.LogicalVolumeGroupSnapshot{})
	if g.Status.Phase != topolvmv1.GroupSnapshotReady || g.Status.SuspendTime == nil || g.Status.SuspendTime.Duration != 7*time.Millisecond {
		t.Errorf("group status %+v", g.Status)
	}
}

// TestReconcile_Refuses: groups the node must not take are refused (phase Refused, a reason and a message
// saying what is wrong) without calling the engine, or failed as the engine reports; members keep no volume.
func TestReconcile_Refuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		thin    bool
		err     error
		objs    []client.Object
		phase   topolvmv1.GroupSnapshotPhase
		reason  string
		says    string
		engined bool
	}{
		{name: "thick device class", thin: false, phase: topolvmv1.GroupSnapshotRefused, reason: "ThickVolume", says: "thin device class"},
		{name: "a member labelled for another group", thin: true, phase: topolvmv1.GroupSnapshotRefused, reason: reconciler.ReasonInvalidMember, says: "g-wal",
			objs: []client.Object{lv("g-wal", "node-a", "wal", func(l *topolvmv1.LogicalVolume) { l.Labels[topolvmv1.GroupSnapshotMemberLabel] = "other" })}},
		{name: "a member that snapshots another volume", thin: true, phase: topolvmv1.GroupSnapshotRefused, reason: reconciler.ReasonInvalidMember, says: "g-wal",
			objs: []client.Object{lv("g-wal", "node-a", "db")}},
		{name: "a source on another node", thin: true, phase: topolvmv1.GroupSnapshotRefused, reason: reconciler.ReasonInvalidMember, says: "node-b",
			objs: []client.Object{lv("wal", "node-b", "")}},
		{name: "the engine refuses", thin: true, err: &groupsnapshot.RefusedError{Reason: groupsnapshot.ReasonMixedPools, Message: "different thin pools"},
			phase: topolvmv1.GroupSnapshotRefused, reason: "MixedThinPools", says: "different thin pools", engined: true},
		{name: "the suspend deadline passes", thin: true, err: &groupsnapshot.DeadlineError{ID: "group-uid", MaxSuspend: time.Second, Taken: 1, Of: 2},
			phase: topolvmv1.GroupSnapshotFailed, reason: reconciler.ReasonSuspendDeadline, says: "every volume was resumed", engined: true},
		{name: "an origin stays suspended", thin: true, err: &groupsnapshot.ResumeError{VG: "vg", LV: "uid-db", Err: errors.New("dmsetup failed")},
			phase: topolvmv1.GroupSnapshotFailed, reason: reconciler.ReasonResumeFailed, says: "dmsetup resume", engined: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := map[string]client.Object{"db": lv("db", "node-a", ""), "wal": lv("wal", "node-a", ""),
				"g-db": lv("g-db", "node-a", "db"), "g-wal": lv("g-wal", "node-a", "wal")}
			for _, o := range tc.objs {
				objs[o.GetName()] = o
			}
			list := []client.Object{group("node-a")}
			for _, o := range objs {
				list = append(list, o)
			}
			e := &engine{err: tc.err}
			c := run(t, e, tc.thin, list...)
			g := get(t, c, "g", &topolvmv1.LogicalVolumeGroupSnapshot{})
			if g.Status.Phase != tc.phase || g.Status.Reason != tc.reason || !strings.Contains(g.Status.Message, tc.says) {
				t.Errorf("group status %+v, want %s %s saying %q", g.Status, tc.phase, tc.reason, tc.says)
			}
			if (len(e.taken) > 0) != tc.engined || len(e.taken) > 1 {
				t.Errorf("engine took %d requests", len(e.taken))
			}
			for _, name := range []string{"g-db", "g-wal"} {
				if m := get(t, c, name, &topolvmv1.LogicalVolume{}); m.Status.VolumeID != "" {
					t.Errorf("member %s got volume %s from a group not taken", name, m.Status.VolumeID)
				}
			}
		})
	}
}

// TestReconcile_OtherNodesGroup: an agent never takes another node's group.
func TestReconcile_OtherNodesGroup(t *testing.T) {
	e := &engine{}
	c := run(t, e, true, group("node-b"), lv("db", "node-b", ""), lv("wal", "node-b", ""), lv("g-db", "node-b", "db"), lv("g-wal", "node-b", "wal"))
	if len(e.taken) != 0 {
		t.Errorf("node-a's agent took node-b's group: %+v", e.taken)
	}
	if g := get(t, c, "g", &topolvmv1.LogicalVolumeGroupSnapshot{}); g.Status.Phase != "" {
		t.Errorf("node-a's agent wrote node-b's group status %+v", g.Status)
	}
}
