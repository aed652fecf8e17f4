package csicontroller_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/shared/hostid"
	"github.com/lvms-dev/lvms/operator/csicontroller"
)

const ns = "lvms"

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func nodeSet(name, vg, class string) *lvmv2.LVMNodeSet {
	return &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: lvmv2.LVMNodeSetSpec{Template: lvmv2.LVMNodeSpec{
		// The node-local ones first: the shared ones are found wherever they are listed.
		VolumeGroups:  []lvmv2.VolumeGroup{{Name: "local"}, {Name: vg, AccessPolicy: lvmv2.AccessPolicyShared}},
		DeviceClasses: []lvmv2.DeviceClass{{Name: "local-ssd", Strategy: lvmv2.StrategyThick, VolumeGroup: "local"}, {Name: class, Strategy: lvmv2.StrategyThick, VolumeGroup: vg}},
	}}}
}

// member is an LVMNode reporting volume group vg, with its host ID's Lease renewed at t0.
func member(name string, hostID int32, joined bool, free int64, active ...lvmv2.SharedActiveVolume) []client.Object {
	state := lvmv2.LockspaceNotJoined
	if joined {
		state = lvmv2.LockspaceJoined
	}
	n := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Status: lvmv2.LVMNodeStatus{
		VolumeGroups: []lvmv2.VolumeGroupStatus{{Name: "local", Free: resource.NewQuantity(100*gib, resource.BinarySI)},
			{Name: "vgshared", Lockspace: state, Free: resource.NewQuantity(free, resource.BinarySI), ActiveVolumes: active}}}}
	if hostID == 0 {
		return []client.Object{n}
	}
	n.Status.SharedLocking = &lvmv2.SharedLockingStatus{HostID: hostID}
	return []client.Object{n, lease(hostID, name, t0)}
}

func lease(id int32, holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: hostid.Name(int(id)), Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: ptr.To(metav1.NewMicroTime(renewed)), LeaseDurationSeconds: ptr.To[int32](140)}}
}

func sharedVol(name string, size int64) *topolvmv1.LogicalVolume {
	q := resource.NewQuantity(size, resource.BinarySI)
	return &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
		Annotations: map[string]string{driver.SharedVolumeGroupAnnotation: "vgshared", driver.SharedWorkerAnnotation: "node-a"},
		Finalizers:  []string{names.LogicalVolumeFinalizer()}},
		Spec:   topolvmv1.LogicalVolumeSpec{Name: name, DeviceClass: "shared", Size: *q},
		Status: topolvmv1.LogicalVolumeStatus{VolumeID: "id-" + name, CurrentSize: q}}
}

// sharedAgents plays the workers' agents of a shared volume group on a fake API server: the worker named on
// a LogicalVolume provisions it, grows it and, once it is deleted, removes it (its finalizer).
type sharedAgents struct {
	c client.Client
}

func newShared(t *testing.T, funcs interceptor.Funcs, admission func() string, objs ...client.Object) (*sharedAgents, *csicontroller.Shared) {
	t.Helper()
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := lvmv2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	create := funcs.Create
	funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		obj.SetUID(types.UID(uuid.NewString()))
		if create != nil {
			return create(ctx, c, obj, opts...)
		}
		return c.Create(ctx, obj, opts...)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&topolvmv1.LogicalVolume{}).WithObjects(objs...).
		WithInterceptorFuncs(funcs).Build()
	a := &sharedAgents{c: c}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			lvs := &topolvmv1.LogicalVolumeList{}
			if err := c.List(ctx, lvs); err == nil {
				for _, lv := range lvs.Items {
					switch {
					case lv.DeletionTimestamp != nil:
						lv.Finalizers = nil
						_ = c.Update(ctx, &lv)
					case lv.Status.VolumeID == "":
						lv.Status.VolumeID, lv.Status.CurrentSize = "id-"+lv.Name, ptrTo(lv.Spec.Size)
						_ = c.Status().Update(ctx, &lv)
					case lv.Status.CurrentSize.Cmp(lv.Spec.Size) < 0:
						lv.Status.CurrentSize = ptrTo(lv.Spec.Size)
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
	return a, csicontroller.NewShared(c, nil, csicontroller.Options{Names: names, Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)),
		Admission: admission, Backoff: csicontroller.Backoff{Initial: time.Millisecond, Factor: 2, Cap: 10 * time.Millisecond}})
}

func (a *sharedAgents) get(t *testing.T, name string) *topolvmv1.LogicalVolume {
	t.Helper()
	lv := &topolvmv1.LogicalVolume{}
	if err := a.c.Get(context.Background(), types.NamespacedName{Name: name}, lv); err != nil {
		t.Fatal(err)
	}
	return lv
}

func rwx() *csi.VolumeCapability {
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}
}

func objects(groups ...[]client.Object) []client.Object {
	var out []client.Object
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// TestShared_CreateVolume: a shared volume is a LogicalVolume of the Shared volume group behind the device
// class, worked on by a node in its lockspace, without node topology; the free space that counts is the
// smallest a joined node reports.
func TestShared_CreateVolume(t *testing.T) {
	a, s := newShared(t, interceptor.Funcs{}, nil, objects([]client.Object{nodeSet("set1", "vgshared", "shared")},
		member("node-a", 1, true, 10*gib), member("node-b", 2, true, 6*gib), member("node-c", 3, false, 1*gib), member("node-d", 0, true, 8*gib))...)
	ctx := callCtx(t)
	req := &csi.CreateVolumeRequest{Name: "PVC-1", VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("shared"),
		CapacityRange: &csi.CapacityRange{RequiredBytes: 6 * gib}}
	resp, err := s.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	lv := a.get(t, "pvc-1")
	worker := lv.Annotations[driver.SharedWorkerAnnotation]
	if lv.Annotations[driver.SharedVolumeGroupAnnotation] != "vgshared" || !slices.Contains([]string{"node-a", "node-b", "node-d"}, worker) ||
		lv.Spec.NodeName != "" || lv.Spec.DeviceClass != "shared" || lv.Spec.Size.Value() != 6*gib ||
		!slices.Contains(lv.Finalizers, names.LogicalVolumeFinalizer()) || lv.Labels[driver.CreatedByLabel] != driver.CreatedByValue {
		t.Errorf("LogicalVolume %+v %+v; want it on vgshared, worked by a joined node (not node-c)", lv.ObjectMeta, lv.Spec)
	}
	if v := resp.GetVolume(); v.GetVolumeId() != "id-pvc-1" || v.GetCapacityBytes() != 6*gib || len(v.GetAccessibleTopology()) != 0 {
		t.Errorf("response %v", v)
	}
	if again, err := s.CreateVolume(ctx, req); err != nil || again.GetVolume().GetVolumeId() != "id-pvc-1" {
		t.Errorf("the same request again: %v, %v", again, err)
	}
	req.CapacityRange.RequiredBytes = 2 * gib
	_, err = s.CreateVolume(ctx, req)
	wantCode(t, "the same name, another size", err, codes.AlreadyExists, "different size")

	_, err = s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-2", VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("shared"),
		CapacityRange: &csi.CapacityRange{RequiredBytes: 6*gib + 4096}})
	wantCode(t, "more than node-b reports free", err, codes.ResourceExhausted, "6442450944 bytes free")

	for what, tc := range map[string]struct {
		req  *csi.CreateVolumeRequest
		code codes.Code
		msg  string
	}{
		"no name":        {&csi.CreateVolumeRequest{VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("shared")}, codes.InvalidArgument, "name"},
		"no capability":  {&csi.CreateVolumeRequest{Name: "x", Parameters: dc("shared")}, codes.InvalidArgument, "volume_capabilities"},
		"RWX filesystem": {&csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{{AccessType: mountCap("").AccessType, AccessMode: rwx().AccessMode}}, Parameters: dc("shared")}, codes.InvalidArgument, "raw block"},
		"a clone": {&csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("shared"),
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "id-pvc-1"}}}}, codes.InvalidArgument, "without snapshots or clones"},
		"no device class":    {&csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{rwx()}}, codes.InvalidArgument, "names no device class"},
		"a node-local class": {&csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("local-ssd")}, codes.InvalidArgument, "not a device class of a Shared volume group"},
		"an unknown class":   {&csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("nvme")}, codes.InvalidArgument, "not a device class of a Shared volume group"},
		"a negative size":    {&csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("shared"), CapacityRange: &csi.CapacityRange{RequiredBytes: -1}}, codes.InvalidArgument, "negative"},
	} {
		_, err := s.CreateVolume(ctx, tc.req)
		wantCode(t, what, err, tc.code, tc.msg)
	}
	caps, err := s.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil || len(caps.GetCapabilities()) != 3 {
		t.Errorf("capabilities %v, %v", caps, err)
	}
}

// TestShared_NoNodeJoinedOrAmbiguousClass: without a joined node nothing can create the volume
// (Unavailable); a device class naming Shared volume groups in two sets is refused.
func TestShared_NoNodeJoinedOrAmbiguousClass(t *testing.T) {
	_, s := newShared(t, interceptor.Funcs{}, nil, objects([]client.Object{nodeSet("set1", "vgshared", "shared"), nodeSet("set2", "vgother", "twice")},
		member("node-a", 1, false, 10*gib))...)
	ctx := callCtx(t)
	_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("shared")})
	wantCode(t, "nobody joined", err, codes.ResourceExhausted, "0 bytes free")
	free, joined, err := s.Capacity(ctx, "shared")
	if err != nil || free != 0 || len(joined) != 0 {
		t.Errorf("Capacity with nobody joined: %d, %v, %v", free, joined, err)
	}

	set3 := nodeSet("set3", "vgthird", "twice")
	_, s = newShared(t, interceptor.Funcs{}, nil, nodeSet("set2", "vgother", "twice"), set3)
	_, err = s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("twice")})
	wantCode(t, "a class in two sets", err, codes.InvalidArgument, "in 2 LVMNodeSets")
}

// TestShared_DeadNodes: a node whose host-ID Lease went unrenewed past the host-dead time, went to another
// node, or is gone, is not in the lockspace: it gets no work, its free space does not count, and what its
// last status says is active is not. A node without a host ID yet is alive.
func TestShared_DeadNodes(t *testing.T) {
	objs := objects([]client.Object{nodeSet("set1", "vgshared", "shared"), sharedVol("v1", gib)},
		member("node-a", 1, true, 1*gib, lvmv2.SharedActiveVolume{Name: "id-v1", Mode: lvmv2.ActivationExclusive}), // its Lease expired below
		member("node-b", 2, true, 1*gib, lvmv2.SharedActiveVolume{Name: "id-v1", Mode: lvmv2.ActivationShared}),    // its Lease went to node-x
		member("node-c", 3, true, 1*gib, lvmv2.SharedActiveVolume{Name: "id-v1", Mode: lvmv2.ActivationShared}),    // its Lease is gone
		member("node-d", 4, true, 5*gib))
	for i, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok {
			switch l.Name {
			case hostid.Name(1):
				objs[i] = lease(1, "node-a", t0.Add(-time.Hour))
			case hostid.Name(2):
				objs[i] = lease(2, "node-x", t0)
			case hostid.Name(3):
				objs[i] = lease(99, "node-c", t0) // node-c's Lease lvms-host-id-3 is not there
			}
		}
	}
	a, s := newShared(t, interceptor.Funcs{}, nil, objs...)
	ctx := callCtx(t)
	free, joined, err := s.Capacity(ctx, "shared")
	if err != nil || free != 5*gib || !slices.Equal(joined, []string{"node-d"}) {
		t.Fatalf("Capacity: %d, %v, %v; want only node-d's 5 GiB", free, joined, err)
	}
	if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v1"}); err != nil {
		t.Fatalf("a volume active only on dead nodes: %v", err)
	}
	if err := a.c.Get(ctx, types.NamespacedName{Name: "v1"}, &topolvmv1.LogicalVolume{}); err == nil {
		t.Error("the volume was not removed")
	}
	resp, err := s.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: dc("shared")})
	if err != nil || resp.GetAvailableCapacity() != 5*gib {
		t.Errorf("GetCapacity: %v, %v", resp, err)
	}
}

// TestShared_DeleteVolume: refused while any node has the volume active (naming it), removed once it is
// not, by a joined node when its worker left; a volume that is gone is deleted already.
func TestShared_DeleteVolume(t *testing.T) {
	v2 := sharedVol("v2", gib)
	v2.Annotations[driver.SharedWorkerAnnotation] = "node-gone"
	a, s := newShared(t, interceptor.Funcs{}, nil, objects([]client.Object{nodeSet("set1", "vgshared", "shared"), sharedVol("v1", gib), v2},
		member("node-a", 1, true, 10*gib, lvmv2.SharedActiveVolume{Name: "id-v1", Mode: lvmv2.ActivationShared}),
		member("node-b", 2, true, 10*gib))...)
	ctx := callCtx(t)
	_, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v1"})
	wantCode(t, "active on node-a", err, codes.FailedPrecondition, "active on node-a (Shared)")
	if a.get(t, "v1").DeletionTimestamp != nil {
		t.Error("an active volume was deleted")
	}

	var handed []string
	a2, s2 := newShared(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		handed = append(handed, obj.GetAnnotations()[driver.SharedWorkerAnnotation])
		return c.Patch(ctx, obj, patch, opts...)
	}}, nil, objects([]client.Object{nodeSet("set1", "vgshared", "shared"), v2.DeepCopy()}, member("node-b", 2, true, 10*gib))...)
	if resp, err := s2.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v2"}); err != nil || resp == nil {
		t.Fatalf("delete: %v, %v", resp, err)
	}
	if !slices.Equal(handed, []string{"node-b"}) {
		t.Errorf("handed to %v; want its work moved to node-b, the node in the lockspace", handed)
	}
	if err := a2.c.Get(ctx, types.NamespacedName{Name: "v2"}, &topolvmv1.LogicalVolume{}); err == nil {
		t.Error("the volume was not removed")
	}
	if _, err := s2.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v2"}); err != nil {
		t.Errorf("again: %v", err)
	}
	_, err = s2.DeleteVolume(ctx, &csi.DeleteVolumeRequest{})
	wantCode(t, "no volume ID", err, codes.InvalidArgument, "volume_id")
}

// TestShared_ExpandVolume: offline only — refused while active anywhere; limited by the free space the joined
// nodes report; the size set and the call returned once the worker grew it; no node expansion.
func TestShared_ExpandVolume(t *testing.T) {
	a, s := newShared(t, interceptor.Funcs{}, nil, objects([]client.Object{nodeSet("set1", "vgshared", "shared"), sharedVol("v1", gib), sharedVol("busy", gib)},
		member("node-a", 1, true, 3*gib, lvmv2.SharedActiveVolume{Name: "id-busy", Mode: lvmv2.ActivationExclusive}), member("node-b", 2, true, 4*gib))...)
	ctx := callCtx(t)
	grow := func(id string, size int64) (*csi.ControllerExpandVolumeResponse, error) {
		return s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: rwx()})
	}
	_, err := grow("id-busy", 2*gib)
	wantCode(t, "an active volume", err, codes.FailedPrecondition, "active on node-a (Exclusive)")
	_, err = grow("id-v1", 4*gib+4096)
	wantCode(t, "more than the smallest free report", err, codes.ResourceExhausted, "3221225472 bytes free; growing volume id-v1 needs 3221229568 more")
	resp, err := grow("id-v1", 4*gib)
	if err != nil || resp.GetCapacityBytes() != 4*gib || resp.GetNodeExpansionRequired() {
		t.Fatalf("grown by exactly the free space: %v, %v", resp, err)
	}
	if lv := a.get(t, "v1"); lv.Spec.Size.Value() != 4*gib || lv.Annotations[names.ResizeRequestedAt()] == "" {
		t.Errorf("spec %s, annotations %v", lv.Spec.Size.String(), lv.Annotations)
	}
	if resp, err := grow("id-busy", gib); err != nil || resp.GetCapacityBytes() != gib {
		t.Errorf("its own size, active: %v, %v; want nothing to do", resp, err)
	}
	_, err = grow("id-none", 2*gib)
	wantCode(t, "no such volume", err, codes.NotFound, "id-none")
	_, err = s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-v1"})
	wantCode(t, "no capacity range", err, codes.InvalidArgument, "capacity_range")
}

// TestShared_Validate: a shared volume's capabilities are confirmed or refused with the reason; a node-local
// volume is not the shared driver's; a volume whose device class now names another volume group is refused.
func TestShared_Validate(t *testing.T) {
	local := volume("local", "node-a", "local-ssd")
	moved := sharedVol("moved", gib)
	moved.Annotations[driver.SharedVolumeGroupAnnotation] = "vgold"
	_, s := newShared(t, interceptor.Funcs{}, nil, objects([]client.Object{nodeSet("set1", "vgshared", "shared"), sharedVol("v1", gib), local, moved},
		member("node-a", 1, true, 10*gib))...)
	ctx := callCtx(t)
	ok, err := s.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "id-v1", VolumeCapabilities: []*csi.VolumeCapability{rwx()}})
	if err != nil || ok.GetConfirmed() == nil {
		t.Errorf("RWX block: %v, %v", ok, err)
	}
	no, err := s.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "id-v1",
		VolumeCapabilities: []*csi.VolumeCapability{{AccessType: mountCap("").AccessType, AccessMode: rwx().AccessMode}}})
	if err != nil || no.GetConfirmed() != nil || !strings.Contains(no.GetMessage(), "raw block") {
		t.Errorf("RWX file system: %v, %v", no, err)
	}
	_, err = s.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "id-local", VolumeCapabilities: []*csi.VolumeCapability{rwx()}})
	wantCode(t, "a node-local volume", err, codes.InvalidArgument, "not a "+driver.SharedDriver+" volume")
	_, err = s.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "id-moved", VolumeCapabilities: []*csi.VolumeCapability{rwx()}})
	wantCode(t, "its class now names another volume group", err, codes.FailedPrecondition, "now names vgshared")
	_, err = s.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "id-none", VolumeCapabilities: []*csi.VolumeCapability{rwx()}})
	wantCode(t, "no such volume", err, codes.NotFound, "id-none")
}

// TestShared_APIErrors: the API server failing is Internal, naming what was read or written.
func TestShared_APIErrors(t *testing.T) {
	boom := errors.New("etcd is down")
	base := objects([]client.Object{nodeSet("set1", "vgshared", "shared")}, member("node-a", 1, true, 10*gib))
	ctx := callCtx(t)
	req := &csi.CreateVolumeRequest{Name: "x", VolumeCapabilities: []*csi.VolumeCapability{rwx()}, Parameters: dc("shared")}
	for what, funcs := range map[string]interceptor.Funcs{
		"list LVMNodeSets": {List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if _, ok := l.(*lvmv2.LVMNodeSetList); ok {
				return boom
			}
			return c.List(ctx, l, opts...)
		}},
		"list LVMNodes": {List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if _, ok := l.(*lvmv2.LVMNodeList); ok {
				return boom
			}
			return c.List(ctx, l, opts...)
		}},
		"get the host-ID Lease": {Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			if _, ok := o.(*coordinationv1.Lease); ok {
				return boom
			}
			return c.Get(ctx, key, o, opts...)
		}},
		"get LogicalVolume": {Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			if _, ok := o.(*topolvmv1.LogicalVolume); ok {
				return boom
			}
			return c.Get(ctx, key, o, opts...)
		}},
		"create LogicalVolume": {Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return boom }},
	} {
		_, s := newShared(t, funcs, nil, base...)
		_, err := s.CreateVolume(ctx, req)
		wantCode(t, what, err, codes.Internal, what)
	}
	// Handing a volume to another node failing.
	v := sharedVol("v1", gib)
	v.Annotations[driver.SharedWorkerAnnotation] = "node-gone"
	_, s := newShared(t, interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
		return boom
	}},
		nil, append(base, v)...)
	_, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v1"})
	wantCode(t, "hand it to another node", err, codes.Internal, "hand LogicalVolume v1 to node node-a")
}

// TestShared_FreeIsTheSmallestReport: a joined node that reports the volume group full counts, whatever the
// others report.
func TestShared_FreeIsTheSmallestReport(t *testing.T) {
	_, s := newShared(t, interceptor.Funcs{}, nil, objects([]client.Object{nodeSet("set1", "vgshared", "shared")},
		member("node-a", 1, true, 0), member("node-b", 2, true, 5*gib), member("node-c", 3, true, 2*gib))...)
	free, joined, err := s.Capacity(callCtx(t), "shared")
	if err != nil || free != 0 || len(joined) != 3 {
		t.Errorf("Capacity = %d, %v, %v; want 0 (node-a's report) of 3 nodes", free, joined, err)
	}
}

// TestShared_DeleteVolume_WaitsForTheWorker: the call returns only once the worker removed the LV; while it
// does not, the call ends with its deadline, not with a success.
func TestShared_DeleteVolume_WaitsForTheWorker(t *testing.T) {
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := lvmv2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&topolvmv1.LogicalVolume{}).
		WithObjects(objects([]client.Object{nodeSet("set1", "vgshared", "shared"), sharedVol("v1", gib)}, member("node-a", 1, true, 10*gib))...).Build()
	s := csicontroller.NewShared(c, nil, csicontroller.Options{Names: names, Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)),
		Backoff: csicontroller.Backoff{Initial: time.Millisecond, Factor: 2, Cap: 10 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	resp, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v1"})
	wantCode(t, "no worker removing it", err, codes.DeadlineExceeded, "removed by its node")
	if resp != nil {
		t.Errorf("a response %v with the error", resp)
	}
}
