package csicontroller_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot/reconciler"
	"github.com/lvms-dev/lvms/operator/csicontroller"
)

const gib = int64(1) << 30

// fakeEngine stands for the node's group snapshot engine: it records the requests it took and answers
// with err when set.
type fakeEngine struct {
	mu    sync.Mutex
	taken []groupsnapshot.Request
	err   error
}

func (e *fakeEngine) Take(_ context.Context, req groupsnapshot.Request) (groupsnapshot.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return groupsnapshot.Result{}, e.err
	}
	e.taken = append(e.taken, req)
	return groupsnapshot.Result{Snapshots: req.Members, Suspended: 5 * time.Millisecond}, nil
}

func (e *fakeEngine) Recover(context.Context) error { return nil }

func (e *fakeEngine) requests() []groupsnapshot.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]groupsnapshot.Request(nil), e.taken...)
}

// cluster is the controller with a fake API and, per node, a loop playing the node agent: the real group
// snapshot reconciler over fakeEngine, and single volumes provisioned at once (status set).
type cluster struct {
	c      client.Client
	ctrl   *csicontroller.Controller
	groups *csicontroller.GroupController
	engine *fakeEngine
}

func newCluster(t *testing.T, thick map[string]bool, objs ...client.Object) *cluster {
	t.Helper()
	scheme, err := driver.New(false).Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&topolvmv1.LogicalVolume{}, &topolvmv1.LogicalVolumeGroupSnapshot{}).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			obj.SetUID(types.UID(uuid.NewString()))
			obj.SetCreationTimestamp(metav1.Now())
			return c.Create(ctx, obj, opts...)
		}}).Build()
	engine := &fakeEngine{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	recs := map[string]*reconciler.Reconciler{}
	for _, node := range []string{"node-a", "node-b"} {
		recs[node] = reconciler.New(c, reconciler.Options{NodeName: node, Engine: engine,
			VolumeGroup: func(dc string) (string, bool, error) { return "vg-" + dc, !thick[dc], nil }})
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			groups := &topolvmv1.LogicalVolumeGroupSnapshotList{}
			if err := c.List(ctx, groups); err == nil {
				for _, g := range groups.Items {
					if r := recs[g.Spec.NodeName]; r != nil {
						_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: g.Name}})
					}
				}
			}
			lvs := &topolvmv1.LogicalVolumeList{}
			if err := c.List(ctx, lvs); err == nil {
				for _, lv := range lvs.Items {
					if lv.Status.VolumeID == "" && lv.Labels[topolvmv1.GroupSnapshotMemberLabel] == "" {
						lv.Status.VolumeID, lv.Status.CurrentSize = string(lv.UID), &lv.Spec.Size
						_ = c.Status().Update(ctx, &lv)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	ctl := csicontroller.NewController(c, nil, csicontroller.Options{Names: driver.New(false),
		Backoff: csicontroller.Backoff{Initial: time.Millisecond, Factor: 2, Cap: 20 * time.Millisecond}})
	return &cluster{c: c, ctrl: ctl, groups: csicontroller.NewGroupController(ctl), engine: engine}
}

// volume is a provisioned thin volume (its volume ID is "id-"+name).
func volume(name, node, dc string) *topolvmv1.LogicalVolume {
	size := resource.NewQuantity(gib, resource.BinarySI)
	return &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec:   topolvmv1.LogicalVolumeSpec{Name: name, NodeName: node, DeviceClass: dc, Size: *size},
		Status: topolvmv1.LogicalVolumeStatus{VolumeID: "id-" + name, CurrentSize: size}}
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// objects lists the LogicalVolume and LogicalVolumeGroupSnapshot names.
func (k *cluster) objects(t *testing.T) (lvs, groups []string) {
	t.Helper()
	l := &topolvmv1.LogicalVolumeList{}
	g := &topolvmv1.LogicalVolumeGroupSnapshotList{}
	if err := k.c.List(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := k.c.List(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	for _, i := range l.Items {
		lvs = append(lvs, i.Name)
	}
	for _, i := range g.Items {
		groups = append(groups, i.Name)
	}
	return lvs, groups
}

func TestGroupControllerGetCapabilities(t *testing.T) {
	k := newCluster(t, nil)
	resp, err := k.groups.GroupControllerGetCapabilities(context.Background(), &csi.GroupControllerGetCapabilitiesRequest{})
	if err != nil || len(resp.GetCapabilities()) != 1 ||
		resp.GetCapabilities()[0].GetRpc().GetType() != csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT {
		t.Fatalf("capabilities %v, %v", resp, err)
	}
}

// TestCreateVolumeGroupSnapshot_TakesMembersTogether: one request to the node's engine with every member,
// members that are snapshots like single ones (restorable), the same answer on a retry, Get agreeing, and
// Delete removing the members and the group but never a source.
func TestCreateVolumeGroupSnapshot_TakesMembersTogether(t *testing.T) {
	k := newCluster(t, nil, volume("db", "node-a", "thin"), volume("wal", "node-a", "thin"))
	ctx := callCtx(t)
	req := &csi.CreateVolumeGroupSnapshotRequest{Name: "groupsnapshot-1", SourceVolumeIds: []string{"id-wal", "id-db"}}
	resp, err := k.groups.CreateVolumeGroupSnapshot(ctx, req)
	if err != nil {
		t.Fatalf("CreateVolumeGroupSnapshot: %v", err)
	}
	gs := resp.GetGroupSnapshot()
	if gs.GetGroupSnapshotId() != "groupsnapshot-1" || !gs.GetReadyToUse() || len(gs.GetSnapshots()) != 2 {
		t.Fatalf("group snapshot %v", gs)
	}
	sources := map[string]string{}
	for _, s := range gs.GetSnapshots() {
		if s.GetGroupSnapshotId() != "groupsnapshot-1" || !s.GetReadyToUse() || s.GetSizeBytes() != gib || s.GetSnapshotId() == "" {
			t.Errorf("member %v", s)
		}
		sources[s.GetSourceVolumeId()] = s.GetSnapshotId()
	}
	if len(sources) != 2 || sources["id-db"] == "" || sources["id-wal"] == "" {
		t.Fatalf("members' sources %v, want id-db and id-wal", sources)
	}
	taken := k.engine.requests()
	if len(taken) != 1 || len(taken[0].Members) != 2 {
		t.Fatalf("engine requests %+v, want one with both members", taken)
	}
	for _, m := range taken[0].Members {
		if m.VG != "vg-thin" || sources["id-"+strings.TrimPrefix(m.Origin, "id-")] != m.Snapshot {
			t.Errorf("engine member %+v does not match the answer %v", m, sources)
		}
	}

	// A retry (the CO's) answers the same without taking the group again.
	again, err := k.groups.CreateVolumeGroupSnapshot(ctx, req)
	if err != nil || len(again.GetGroupSnapshot().GetSnapshots()) != 2 || len(k.engine.requests()) != 1 {
		t.Fatalf("retry: %v, %v; engine requests %d", again, err, len(k.engine.requests()))
	}
	for _, s := range again.GetGroupSnapshot().GetSnapshots() {
		if sources[s.GetSourceVolumeId()] != s.GetSnapshotId() {
			t.Errorf("retry answered member %v, first call %v", s, sources)
		}
	}
	// The same name with other sources is another group.
	if _, err := k.groups.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "groupsnapshot-1", SourceVolumeIds: []string{"id-db"}}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("same name, other sources: %v, want AlreadyExists", err)
	}

	got, err := k.groups.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "groupsnapshot-1"})
	if err != nil || len(got.GetGroupSnapshot().GetSnapshots()) != 2 || !got.GetGroupSnapshot().GetReadyToUse() {
		t.Fatalf("GetVolumeGroupSnapshot: %v, %v", got, err)
	}

	// A member restores as a single snapshot does: a new volume on the source's node with the member as source.
	vol, err := k.ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-restored", CapacityRange: &csi.CapacityRange{RequiredBytes: gib},
		VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}},
		Parameters:          map[string]string{"topolvm.io/device-class": "thin"},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: sources["id-db"]}}}})
	if err != nil {
		t.Fatalf("restore a member: %v", err)
	}
	restored := &topolvmv1.LogicalVolume{}
	if err := k.c.Get(ctx, types.NamespacedName{Name: "pvc-restored"}, restored); err != nil {
		t.Fatal(err)
	}
	if restored.Spec.NodeName != "node-a" || restored.Spec.AccessType != "rw" || vol.GetVolume().GetAccessibleTopology()[0].GetSegments()["topology.topolvm.io/node"] != "node-a" {
		t.Errorf("restored volume %+v", restored.Spec)
	}
	member := &topolvmv1.LogicalVolume{}
	if err := k.c.Get(ctx, types.NamespacedName{Name: restored.Spec.Source}, member); err != nil || member.Status.VolumeID != sources["id-db"] {
		t.Errorf("restore's source %s is not the member %s: %v", restored.Spec.Source, sources["id-db"], err)
	}

	// Delete refuses snapshot IDs from outside the group, deleting nothing.
	if _, err := k.groups.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "groupsnapshot-1",
		SnapshotIds: []string{sources["id-db"], "id-wal"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("delete naming a source as a member: %v, want InvalidArgument", err)
	}
	if lvs, groups := k.objects(t); len(lvs) != 5 || len(groups) != 1 {
		t.Fatalf("after a refused delete: volumes %v, groups %v", lvs, groups)
	}
	if _, err := k.groups.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "groupsnapshot-1",
		SnapshotIds: []string{sources["id-db"], sources["id-wal"]}}); err != nil {
		t.Fatalf("DeleteVolumeGroupSnapshot: %v", err)
	}
	lvs, groups := k.objects(t)
	if strings.Join(lvs, ",") != "db,pvc-restored,wal" || len(groups) != 0 {
		t.Errorf("after delete: volumes %v, groups %v; want the sources and the restored volume only", lvs, groups)
	}
	if _, err := k.groups.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "groupsnapshot-1"}); err != nil {
		t.Errorf("deleting a deleted group: %v, want OK", err)
	}
	if _, err := k.groups.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "groupsnapshot-1"}); status.Code(err) != codes.NotFound {
		t.Errorf("get a deleted group: %v, want NotFound", err)
	}
}

// TestCreateVolumeGroupSnapshot_Refusals: every group that cannot be taken crash-consistently is refused
// with FailedPrecondition, a message naming what is wrong, and no object left: no member, no group.
func TestCreateVolumeGroupSnapshot_Refusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sources   []string
		thick     map[string]bool
		engineErr error
		code      codes.Code
		message   []string
		taken     bool
	}{
		{name: "volumes on two nodes", sources: []string{"id-a1", "id-b1"}, code: codes.FailedPrecondition,
			message: []string{"id-b1 (node node-b)", "one node"}},
		{name: "volumes in two device classes", sources: []string{"id-a1", "id-a2"}, code: codes.FailedPrecondition,
			message: []string{"id-a2 (device class other)", "one thin device class"}},
		{name: "a shared volume", sources: []string{"id-a1", "id-shared"}, code: codes.FailedPrecondition,
			message: []string{"id-shared", "shared volume group"}},
		{name: "a snapshot as source", sources: []string{"id-a1", "id-snap"}, code: codes.FailedPrecondition,
			message: []string{"id-snap is a snapshot"}},
		{name: "a thick device class", sources: []string{"id-a1", "id-a3"}, thick: map[string]bool{"thin": true}, code: codes.FailedPrecondition,
			message: []string{"thick"}},
		{name: "the node refuses: two thin pools", sources: []string{"id-a1", "id-a3"}, code: codes.FailedPrecondition,
			engineErr: &groupsnapshot.RefusedError{Reason: groupsnapshot.ReasonMixedPools, Message: "volumes vg/a and vg/b are in different thin pools"},
			message:   []string{"different thin pools"}},
		{name: "the suspend deadline passes", sources: []string{"id-a1", "id-a3"}, code: codes.Unavailable,
			engineErr: &groupsnapshot.DeadlineError{ID: "x", MaxSuspend: time.Second, Taken: 1, Of: 2},
			message:   []string{"abandoned"}},
		{name: "an unknown volume", sources: []string{"id-a1", "id-gone"}, code: codes.NotFound, message: []string{"id-gone"}},
		{name: "a volume twice", sources: []string{"id-a1", "id-a1"}, code: codes.InvalidArgument, message: []string{"twice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := volume("snap", "node-a", "thin")
			snap.Spec.Source, snap.Spec.AccessType = "a1", "ro"
			k := newCluster(t, tc.thick, volume("a1", "node-a", "thin"), volume("a3", "node-a", "thin"), volume("a2", "node-a", "other"),
				volume("b1", "node-b", "thin"), volume("shared", "", "thin"), snap)
			k.engine.err = tc.engineErr
			before, _ := k.objects(t)
			_, err := k.groups.CreateVolumeGroupSnapshot(callCtx(t), &csi.CreateVolumeGroupSnapshotRequest{Name: "group", SourceVolumeIds: tc.sources})
			if status.Code(err) != tc.code {
				t.Fatalf("error %v, want code %s", err, tc.code)
			}
			for _, m := range tc.message {
				if !strings.Contains(status.Convert(err).Message(), m) {
					t.Errorf("message %q does not say %q", status.Convert(err).Message(), m)
				}
			}
			lvs, groups := k.objects(t)
			if strings.Join(lvs, ",") != strings.Join(before, ",") || len(groups) != 0 {
				t.Errorf("left volumes %v (before %v), groups %v", lvs, before, groups)
			}
			if len(k.engine.requests()) != 0 {
				t.Errorf("the engine took %+v", k.engine.requests())
			}
		})
	}
}
