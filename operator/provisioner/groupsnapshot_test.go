package provisioner_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot/reconciler"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
	"github.com/lvms-dev/lvms/operator/csicontroller"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// lvmdEngine stands in for a node's group snapshot engine (which the VM lane proves with real
// device-mapper): it checks nothing itself and creates each member's snapshot through the node's lvmd, so
// the snapshots exist in lvmsim as the real engine leaves them (thin, read-only, named after the member's
// LogicalVolume uid).
type lvmdEngine struct {
	lvmd  lvmdapi.Client
	mu    sync.Mutex
	takes int
}

func (e *lvmdEngine) Take(ctx context.Context, req groupsnapshot.Request) (groupsnapshot.Result, error) {
	e.mu.Lock()
	e.takes++
	e.mu.Unlock()
	for _, m := range req.Members {
		// The simulated nodes name each volume group after its device class.
		if _, err := e.lvmd.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: m.Snapshot, DeviceClass: m.VG,
			SourceVolume: m.Origin, AccessType: "ro", SizeBytes: csidriver.GiB}); err != nil {
			return groupsnapshot.Result{}, err
		}
	}
	return groupsnapshot.Result{Snapshots: req.Members, Suspended: 3 * time.Millisecond}, nil
}

func (e *lvmdEngine) Recover(context.Context) error { return nil }

func (e *lvmdEngine) taken() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.takes
}

func newGroupSuite(t *testing.T) (*suite, map[string]*lvmdEngine) {
	testenv.Require(t)
	names := driver.New(false)
	s := &suite{t: t, names: names, ns: env.Namespace(t), prefix: "grp", nodeA: "grp-node-a", nodeB: "grp-node-b",
		clock: clocktesting.NewFakeClock(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))}
	engines := map[string]*lvmdEngine{}
	s.d = csidriver.Start(t, env.Config, csidriver.Options{Names: names, Nodes: []string{s.nodeA, s.nodeB},
		Setup: func(mgr manager.Manager, d *csidriver.Driver) error {
			for _, n := range d.Nodes {
				engines[n.Name] = &lvmdEngine{lvmd: n.LVMD}
				cfg := csidriver.Config()
				r := reconciler.New(mgr.GetClient(), reconciler.Options{NodeName: n.Name, Engine: engines[n.Name], Reader: mgr.GetAPIReader(),
					VolumeGroup: func(dc string) (string, bool, error) {
						for _, c := range cfg.DeviceClasses {
							if c.Name == dc || (dc == "" && c.Default) {
								return c.VolumeGroup, c.Type == "thin", nil
							}
						}
						return "", false, fmt.Errorf("no device class %q", dc)
					}})
				if err := r.SetupWithManager(mgr); err != nil {
					return err
				}
			}
			return provisioner.New(provisioner.Options{Names: names, CSI: d.Controller, GroupCSI: csicontroller.NewGroupController(d.Controller),
				CapacityNamespace: s.ns, Snapshots: true, CallTimeout: callTimeout, Clock: s.clock}).SetupWithManager(mgr)
		}})
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if s.c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return s, engines
}

// volumeOn is a bound claim of class sc on node.
func (s *suite) volumeOn(name, sc, node string) *corev1.PersistentVolume {
	s.t.Helper()
	pvc := s.pvc(name, sc, "1Gi")
	s.selectNode(pvc, node)
	pv := s.provisioned(pvc)
	s.bind(pvc, pv)
	return pv
}

// groupOf plays the snapshot controller: a VolumeGroupSnapshot in namespace ns and its dynamic content
// with the volume handles its selector chose.
func (s *suite) groupOf(ns, name string, pvs ...*corev1.PersistentVolume) (*groupv1.VolumeGroupSnapshot, *groupv1.VolumeGroupSnapshotContent) {
	s.t.Helper()
	ctx := context.Background()
	class := "lvms-group"
	vgs := &groupv1.VolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: groupv1.VolumeGroupSnapshotSpec{VolumeGroupSnapshotClassName: &class, Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}}
	if err := s.c.Create(ctx, vgs); err != nil {
		s.t.Fatal(err)
	}
	var handles []string
	for _, pv := range pvs {
		handles = append(handles, pv.Spec.CSI.VolumeHandle)
	}
	content := &groupv1.VolumeGroupSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: s.prefix + "-" + name},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{Driver: s.names.Driver(), DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
			VolumeGroupSnapshotClassName: &class, Source: groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: handles},
			VolumeGroupSnapshotRef: corev1.ObjectReference{Namespace: ns, Name: vgs.Name, UID: vgs.UID}}}
	if err := s.c.Create(ctx, content); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.c.Delete(context.Background(), content) })
	return vgs, content
}

// groupWarning waits for a Warning event on the VolumeGroupSnapshot containing every one of contains.
func (s *suite) groupWarning(vgs *groupv1.VolumeGroupSnapshot, contains ...string) string {
	s.t.Helper()
	var found string
	s.eventually("warning on VolumeGroupSnapshot "+vgs.Name+" saying "+strings.Join(contains, ", "), func() error {
		list := &eventsv1.EventList{}
		if err := s.c.List(context.Background(), list, client.InNamespace(vgs.Namespace)); err != nil {
			return err
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.UID != vgs.UID || e.Type != corev1.EventTypeWarning {
				continue
			}
			notes = append(notes, e.Note)
			ok := true
			for _, c := range contains {
				ok = ok && strings.Contains(e.Note, c)
			}
			if ok {
				found = e.Note
				return nil
			}
		}
		return fmt.Errorf("warnings %q", notes)
	})
	return found
}

// groupObjects lists the LogicalVolumeGroupSnapshots and the member snapshot LogicalVolumes.
func (s *suite) groupObjects() (groups, members []string) {
	s.t.Helper()
	g := &topolvmv1.LogicalVolumeGroupSnapshotList{}
	l := &topolvmv1.LogicalVolumeList{}
	if err := s.c.List(context.Background(), g); err != nil {
		s.t.Fatal(err)
	}
	if err := s.c.List(context.Background(), l, client.HasLabels{topolvmv1.GroupSnapshotMemberLabel}); err != nil {
		s.t.Fatal(err)
	}
	for _, i := range g.Items {
		groups = append(groups, i.Name)
	}
	for _, i := range l.Items {
		members = append(members, i.Name)
	}
	return groups, members
}

func TestGroupSnapshots(t *testing.T) {
	testenv.Require(t)
	s, engines := newGroupSuite(t)
	ctx := context.Background()
	thin := s.storageClass("thin", true)
	thick := s.storageClass("thick", true)
	db, wal := s.volumeOn("db", thin, s.nodeA), s.volumeOn("wal", thin, s.nodeA)
	elsewhere := s.volumeOn("elsewhere", thin, s.nodeB)
	thickA, thickB := s.volumeOn("thick-a", thick, s.nodeA), s.volumeOn("thick-b", thick, s.nodeA)
	nodeA := s.d.Node(s.nodeA).LVM

	t.Run("refusals leave nothing behind", func(t *testing.T) {
		s.t = t
		other := env.Namespace(t)
		for _, tc := range []struct {
			name, ns string
			pvs      []*corev1.PersistentVolume
			says     []string
		}{
			{"two-nodes", s.ns, []*corev1.PersistentVolume{db, elsewhere}, []string{elsewhere.Spec.CSI.VolumeHandle, "node " + s.nodeB, "one node"}},
			{"two-classes", s.ns, []*corev1.PersistentVolume{db, thickA}, []string{thickA.Spec.CSI.VolumeHandle, "device class thick"}},
			{"thick", s.ns, []*corev1.PersistentVolume{thickA, thickB}, []string{"thick", "thin device class"}},
			// A tenant's group naming another namespace's volumes (the content is cluster-scoped: whoever
			// can write one can fill in any handle).
			{"foreign-claims", other, []*corev1.PersistentVolume{db, wal}, []string{"claimed in its own namespace", db.Spec.CSI.VolumeHandle}},
		} {
			vgs, content := s.groupOf(tc.ns, tc.name, tc.pvs...)
			t.Logf("%s: %s", tc.name, s.groupWarning(vgs, tc.says...))
			s.eventually("error in the content's status", func() error {
				if err := s.c.Get(ctx, client.ObjectKeyFromObject(content), content); err != nil {
					return err
				}
				if content.Status == nil || content.Status.Error == nil || content.Status.VolumeGroupSnapshotHandle != nil {
					return fmt.Errorf("status %+v", content.Status)
				}
				return nil
			})
		}
		// Every refusal is checked before the node takes anything (thick by the node's agent, the others by
		// the controller), and whatever a refused group created is gone.
		s.eventually("no group and no member left", func() error {
			if groups, members := s.groupObjects(); len(groups)+len(members) > 0 {
				return fmt.Errorf("groups %v, members %v", groups, members)
			}
			return nil
		})
		if n := engines[s.nodeA].taken() + engines[s.nodeB].taken(); n != 0 {
			t.Errorf("the engines took %d groups", n)
		}
		if lvs := nodeA.LVs("thin"); len(lvs) != 3 { // the pool, db and wal
			t.Errorf("node A's thin LVs %+v, want the pool, db and wal only", lvs)
		}
	})

	t.Run("a group is taken, restored from and deleted", func(t *testing.T) {
		s.t = t
		_, content := s.groupOf(s.ns, "app", db, wal)
		s.eventually("group snapshot taken", func() error {
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(content), content); err != nil {
				return err
			}
			if content.Status == nil || content.Status.VolumeGroupSnapshotHandle == nil || len(content.Status.VolumeSnapshotInfoList) != 2 {
				return fmt.Errorf("status %+v", content.Status)
			}
			return nil
		})
		// The group records the VolumeGroupSnapshot it was taken for (the console shows it).
		lvgs := &topolvmv1.LogicalVolumeGroupSnapshot{}
		if err := s.c.Get(ctx, client.ObjectKey{Name: *content.Status.VolumeGroupSnapshotHandle}, lvgs); err != nil {
			t.Fatal(err)
		}
		if a := lvgs.Annotations; a[topolvmv1.AnnotationVolumeGroupSnapshotName] != "app" || a[topolvmv1.AnnotationVolumeGroupSnapshotNamespace] != s.ns {
			t.Errorf("the group's annotations %v do not name VolumeGroupSnapshot %s/app", a, s.ns)
		}
		infos := content.Status.VolumeSnapshotInfoList
		for i, pv := range []*corev1.PersistentVolume{db, wal} {
			info := infos[i]
			lv, ok := nodeA.LV("thin", info.SnapshotHandle)
			if info.VolumeHandle != pv.Spec.CSI.VolumeHandle || !ok || lv.Origin != pv.Spec.CSI.VolumeHandle || !lv.ReadOnly ||
				info.RestoreSize == nil || *info.RestoreSize != csidriver.GiB || info.ReadyToUse == nil || !*info.ReadyToUse {
				t.Errorf("member %d: %+v, LV %+v (exists %v); want a read-only snapshot of %s", i, info, lv, ok, pv.Spec.CSI.VolumeHandle)
			}
		}
		if n := engines[s.nodeA].taken(); n != 1 {
			t.Errorf("node A's engine took %d groups, want 1", n)
		}

		// The snapshot controller makes a VolumeSnapshotContent and VolumeSnapshot per member; a claim from one
		// is restored as from a single snapshot.
		member := &snapshotv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "grp-member-db"},
			Spec: snapshotv1.VolumeSnapshotContentSpec{Driver: s.names.Driver(), DeletionPolicy: snapshotv1.VolumeSnapshotContentRetain,
				Source:            snapshotv1.VolumeSnapshotContentSource{SnapshotHandle: &infos[0].SnapshotHandle},
				VolumeSnapshotRef: corev1.ObjectReference{Namespace: s.ns, Name: "app-db"}}}
		vs := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "app-db"},
			Spec: snapshotv1.VolumeSnapshotSpec{Source: snapshotv1.VolumeSnapshotSource{VolumeSnapshotContentName: &member.Name}}}
		if err := s.c.Create(ctx, vs); err != nil {
			t.Fatal(err)
		}
		member.Spec.VolumeSnapshotRef.UID = vs.UID
		if err := s.c.Create(ctx, member); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.c.Delete(context.Background(), member) })
		s.eventually("member content ready", func() error {
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(member), member); err != nil {
				return err
			}
			if member.Status == nil || member.Status.ReadyToUse == nil || !*member.Status.ReadyToUse {
				return fmt.Errorf("status %+v", member.Status)
			}
			return nil
		})
		ready := true
		vs.Status = &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &member.Name, ReadyToUse: &ready}
		if err := s.c.Status().Update(ctx, vs); err != nil {
			t.Fatal(err)
		}
		group := snapshotv1.GroupName
		restore := s.pvc("restore-db", thin, "1Gi", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: vs.Name}
		})
		s.selectNode(restore, s.nodeA)
		pv := s.provisioned(restore)
		if lv, ok := nodeA.LV("thin", pv.Spec.CSI.VolumeHandle); !ok || lv.Origin != infos[0].SnapshotHandle || lv.ReadOnly {
			t.Errorf("restored LV %+v (exists %v), want a writable volume from member %s", lv, ok, infos[0].SnapshotHandle)
		}

		// Deleting the content deletes the group's snapshots, never their origins or the restored volume.
		if err := s.c.Delete(ctx, content); err != nil {
			t.Fatal(err)
		}
		s.eventually("content gone", func() error {
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(content), content); !apierrors.IsNotFound(err) {
				return fmt.Errorf("content still there: %v", err)
			}
			return nil
		})
		for _, info := range infos {
			if _, ok := nodeA.LV("thin", info.SnapshotHandle); ok {
				t.Errorf("member snapshot %s still exists", info.SnapshotHandle)
			}
		}
		for _, id := range []string{db.Spec.CSI.VolumeHandle, wal.Spec.CSI.VolumeHandle, pv.Spec.CSI.VolumeHandle} {
			if _, ok := nodeA.LV("thin", id); !ok {
				t.Errorf("volume %s was removed with the group", id)
			}
		}
		if groups, members := s.groupObjects(); len(groups)+len(members) > 0 {
			t.Errorf("left groups %v, members %v", groups, members)
		}
	})
}
