package csicontroller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/operator/csicontroller"
)

var names = driver.New(false)

// node is a Node with the topology label and free bytes per device class, as the node agent reports them.
func node(name string, free map[string]int64) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{names.TopologyKey(): name}, Annotations: map[string]string{}}}
	for dc, b := range free {
		n.Annotations[names.CapacityAnnotation(dc)] = strconv.FormatInt(b, 10)
	}
	return n
}

// agents plays every node's agent on a fake API server: a new LogicalVolume is provisioned (or refused when
// its name starts with "refuse-"), a grown one grown (up to a size that fails with "fail-grow"); a deleted
// one goes at once.
type agents struct {
	c client.Client
}

func newAgents(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) (*agents, *csicontroller.Controller) {
	t.Helper()
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	create := funcs.Create
	funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		obj.SetUID(types.UID(uuid.NewString()))
		obj.SetCreationTimestamp(metav1.Now())
		if create != nil {
			return create(ctx, c, obj, opts...)
		}
		return c.Create(ctx, obj, opts...)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&topolvmv1.LogicalVolume{}).WithObjects(objs...).
		WithInterceptorFuncs(funcs).Build()
	a := &agents{c: c}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			a.pass(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return a, csicontroller.NewController(c, nil, csicontroller.Options{Names: names,
		Backoff: csicontroller.Backoff{Initial: time.Millisecond, Factor: 2, Cap: 10 * time.Millisecond}})
}

func (a *agents) pass(ctx context.Context) {
	lvs := &topolvmv1.LogicalVolumeList{}
	if err := a.c.List(ctx, lvs); err != nil {
		return
	}
	for _, lv := range lvs.Items {
		switch {
		case lv.Status.Code != 0:
		case lv.Status.VolumeID == "" && strings.HasPrefix(lv.Name, "refuse-"):
			lv.Status.Code, lv.Status.Message = int32(codes.ResourceExhausted), "not enough space in the volume group"
		case lv.Status.VolumeID == "":
			lv.Status.VolumeID, lv.Status.CurrentSize = "id-"+lv.Name, ptrTo(lv.Spec.Size)
		case lv.Status.CurrentSize.Cmp(lv.Spec.Size) < 0 && strings.HasPrefix(lv.Name, "fail-grow"):
			lv.Status.Code, lv.Status.Message = int32(codes.Internal), "lvextend failed"
		case lv.Status.CurrentSize.Cmp(lv.Spec.Size) < 0:
			lv.Status.CurrentSize = ptrTo(lv.Spec.Size)
		default:
			continue
		}
		_ = a.c.Status().Update(ctx, &lv)
	}
}

func ptrTo(q resource.Quantity) *resource.Quantity { return &q }

func (a *agents) get(t *testing.T, name string) *topolvmv1.LogicalVolume {
	t.Helper()
	lv := &topolvmv1.LogicalVolume{}
	if err := a.c.Get(context.Background(), types.NamespacedName{Name: name}, lv); err != nil {
		t.Fatal(err)
	}
	return lv
}

func mountCap(fs string) *csi.VolumeCapability {
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
}

func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
}

func on(nodes ...string) *csi.TopologyRequirement {
	r := &csi.TopologyRequirement{}
	for _, n := range nodes {
		r.Requisite = append(r.Requisite, &csi.Topology{Segments: map[string]string{names.TopologyKey(): n}})
	}
	return r
}

func dc(class string) map[string]string { return map[string]string{names.DeviceClassParam(): class} }

func wantCode(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("%s: %v; want %s saying %q", what, err, code, msg)
	}
}

// TestCreateVolume_PicksTheNode: without topology (csi-sanity) the node with the most free bytes in the
// device class, the lowest name on a tie, and none when no node has room; with topology the first preferred,
// then requisite, node — which must exist.
func TestCreateVolume_PicksTheNode(t *testing.T) {
	a, ctl := newAgents(t, interceptor.Funcs{},
		node("node-a", map[string]int64{"ssd": 5 * gib, "hdd": 1 * gib}),
		node("node-b", map[string]int64{"ssd": 3 * gib, "hdd": 4 * gib}),
		node("node-c", map[string]int64{"hdd": 4 * gib}),
		node("node-d", map[string]int64{driver.DefaultDeviceClassKey: 2 * gib}),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-e", Annotations: map[string]string{names.CapacityAnnotation("ssd"): "many"}}})
	ctx := callCtx(t)
	create := func(name string, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
		req.Name = name
		if req.VolumeCapabilities == nil {
			req.VolumeCapabilities = []*csi.VolumeCapability{mountCap("ext4")}
		}
		return ctl.CreateVolume(ctx, req)
	}
	for _, tc := range []struct {
		name, class, want string
		req               *csi.TopologyRequirement
	}{
		{"most free ssd", "ssd", "node-a", nil},
		{"most free hdd, lowest name on a tie", "hdd", "node-b", nil},
		{"the default device class", "", "node-d", nil},
		{"requisite", "ssd", "node-b", on("node-b", "node-a")},
		{"preferred before requisite", "ssd", "node-c", &csi.TopologyRequirement{Requisite: on("node-a").Requisite, Preferred: on("node-c").Requisite}},
		{"a segment without the topology key is skipped", "ssd", "node-a",
			&csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "z1"}}, on("node-a").Requisite[0]}}},
		{"a segment with an empty node is skipped", "ssd", "node-b",
			&csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: map[string]string{names.TopologyKey(): ""}}}, Requisite: on("node-b").Requisite}},
	} {
		resp, err := create("pvc-"+strings.ReplaceAll(tc.name, " ", "-"), &csi.CreateVolumeRequest{Parameters: dc(tc.class), AccessibilityRequirements: tc.req})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := resp.GetVolume().GetAccessibleTopology()[0].GetSegments()[names.TopologyKey()]
		if got != tc.want || a.get(t, "pvc-"+strings.ReplaceAll(tc.name, " ", "-")).Spec.NodeName != tc.want {
			t.Errorf("%s: on %s, want %s", tc.name, got, tc.want)
		}
	}
	_, err := create("pvc-too-big", &csi.CreateVolumeRequest{Parameters: dc("ssd"), CapacityRange: &csi.CapacityRange{RequiredBytes: 5*gib + 4096}})
	wantCode(t, "no node with room", err, codes.ResourceExhausted, `the most is 5368709120 bytes on node "node-a"`)
	_, err = create("pvc-exact", &csi.CreateVolumeRequest{Parameters: dc("ssd"), CapacityRange: &csi.CapacityRange{RequiredBytes: 5 * gib}})
	if err != nil {
		t.Errorf("a volume of exactly the most free bytes: %v", err)
	}
	_, err = create("pvc-nowhere", &csi.CreateVolumeRequest{Parameters: dc("nvme")})
	wantCode(t, "a device class no node has", err, codes.ResourceExhausted, `device class "nvme": the most is 0 bytes on node "node-a"`)
	_, err = create("pvc-nowhere-default", &csi.CreateVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * gib}})
	wantCode(t, "the default device class, full", err, codes.ResourceExhausted, `device class "`+driver.DefaultDeviceClassKey+`"`)
	_, err = create("pvc-gone", &csi.CreateVolumeRequest{Parameters: dc("ssd"), AccessibilityRequirements: on("node-x")})
	wantCode(t, "a node that does not exist", err, codes.ResourceExhausted, `node "node-x" does not exist`)
	_, err = create("pvc-nokey", &csi.CreateVolumeRequest{Parameters: dc("ssd"),
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "z1"}}}}})
	wantCode(t, "no topology key", err, codes.InvalidArgument, names.TopologyKey())
}

// TestCreateVolume_Requests: what the request asks for is what the LogicalVolume says (size rounded, the
// file system's minimum, the lvcreate option class), a repeated call returns the same volume, a different one
// of the same name is refused, and bad requests are InvalidArgument.
func TestCreateVolume_Requests(t *testing.T) {
	a, ctl := newAgents(t, interceptor.Funcs{}, node("node-a", map[string]int64{"ssd": 100 * gib}))
	ctx := callCtx(t)
	req := &csi.CreateVolumeRequest{Name: "PVC-Upper", VolumeCapabilities: []*csi.VolumeCapability{mountCap("xfs")},
		Parameters:    map[string]string{names.DeviceClassParam(): "ssd", names.OptionClassParam(): "raid1"},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}}
	resp, err := ctl.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	lv := a.get(t, "pvc-upper")
	if lv.Spec.Name != "pvc-upper" || lv.Spec.DeviceClass != "ssd" || lv.Spec.LvcreateOptionClass != "raid1" || lv.Spec.Size.Value() != 300<<20 {
		t.Errorf("LogicalVolume spec %+v; want xfs's 300 MiB minimum, the device and option classes", lv.Spec)
	}
	if resp.GetVolume().GetVolumeId() != "id-pvc-upper" || resp.GetVolume().GetCapacityBytes() != 300<<20 {
		t.Errorf("response %v", resp)
	}
	again, err := ctl.CreateVolume(ctx, req)
	if err != nil || again.GetVolume().GetVolumeId() != resp.GetVolume().GetVolumeId() {
		t.Errorf("the same request again: %v, %v", again, err)
	}
	req.CapacityRange.RequiredBytes = 2 * gib
	_, err = ctl.CreateVolume(ctx, req)
	wantCode(t, "the same name, another size", err, codes.AlreadyExists, "different size or source")

	for what, r := range map[string]*csi.CreateVolumeRequest{
		"no name":              {VolumeCapabilities: []*csi.VolumeCapability{mountCap("ext4")}},
		"no capability":        {Name: "x"},
		"neither block nor fs": {Name: "x", VolumeCapabilities: []*csi.VolumeCapability{{AccessMode: mountCap("").AccessMode}}},
		"multi-node":           {Name: "x", VolumeCapabilities: []*csi.VolumeCapability{{AccessType: blockCap().AccessType, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}}},
		"limit below required": {Name: "x", VolumeCapabilities: []*csi.VolumeCapability{blockCap()}, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib, LimitBytes: gib}},
	} {
		_, err := ctl.CreateVolume(ctx, r)
		wantCode(t, what, err, codes.InvalidArgument, "")
	}

	// The node refusing: its code, and the object deleted so that a retry starts afresh.
	_, err = ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "refuse-me", VolumeCapabilities: []*csi.VolumeCapability{blockCap()}, Parameters: dc("ssd")})
	wantCode(t, "the node refusing", err, codes.ResourceExhausted, "not enough space")
	if err := a.c.Get(ctx, types.NamespacedName{Name: "refuse-me"}, &topolvmv1.LogicalVolume{}); err == nil {
		t.Error("the refused LogicalVolume is still there")
	}
}

// TestCreateVolume_FromSource: a clone or restore goes to the source's node and device class, at least the
// source's size; a missing source, a smaller size, another class or a topology without the source's node
// are refused.
func TestCreateVolume_FromSource(t *testing.T) {
	src := volume("src", "node-b", "thin")
	a, ctl := newAgents(t, interceptor.Funcs{}, node("node-a", map[string]int64{"thin": 100 * gib}), node("node-b", map[string]int64{"thin": gib}), src)
	ctx := callCtx(t)
	fromVolume := func(id string) *csi.VolumeContentSource {
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}
	}
	fromSnapshot := func(id string) *csi.VolumeContentSource {
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
	}
	req := func(name string, source *csi.VolumeContentSource, class string, size int64, topo *csi.TopologyRequirement) *csi.CreateVolumeRequest {
		return &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{blockCap()}, Parameters: dc(class),
			CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeContentSource: source, AccessibilityRequirements: topo}
	}
	for name, source := range map[string]*csi.VolumeContentSource{"clone": fromVolume("id-src"), "restore": fromSnapshot("id-src")} {
		resp, err := ctl.CreateVolume(ctx, req(name, source, "thin", gib, on("node-a", "node-b")))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lv := a.get(t, name)
		if lv.Spec.NodeName != "node-b" || lv.Spec.Source != "src" || lv.Spec.AccessType != "rw" || lv.Spec.DeviceClass != "thin" {
			t.Errorf("%s: spec %+v; want on the source's node, from it, writable", name, lv.Spec)
		}
		if resp.GetVolume().GetContentSource() != source {
			t.Errorf("%s: the response does not name its source", name)
		}
	}
	if _, err := ctl.CreateVolume(ctx, req("bigger", fromVolume("id-src"), "thin", 2*gib, nil)); err != nil {
		t.Errorf("a clone larger than its source: %v", err)
	}
	_, err := ctl.CreateVolume(ctx, req("x1", fromVolume("id-none"), "thin", gib, nil))
	wantCode(t, "no such source", err, codes.NotFound, "id-none")
	_, err = ctl.CreateVolume(ctx, req("x2", fromVolume("id-src"), "thin", gib/2, nil))
	wantCode(t, "smaller than the source", err, codes.OutOfRange, "smaller than the source's")
	_, err = ctl.CreateVolume(ctx, req("x3", fromVolume("id-src"), "thick", gib, nil))
	wantCode(t, "another device class", err, codes.InvalidArgument, `"thick" differs from the source's "thin"`)
	_, err = ctl.CreateVolume(ctx, req("x4", fromVolume("id-src"), "thin", gib, on("node-a")))
	wantCode(t, "a topology without the source's node", err, codes.InvalidArgument, `node "node-b"`)
	wantCode(t, "a topology without the source's node", err, codes.InvalidArgument, "nodeSelector kubernetes.io/hostname: node-b")
	_, err = ctl.CreateVolume(ctx, req("x5", &csi.VolumeContentSource{}, "thin", gib, nil))
	wantCode(t, "a source of no kind", err, codes.InvalidArgument, "snapshot or a volume")
	_, err = ctl.CreateVolume(ctx, req("x6", fromSnapshot("id-src"), "thin", gib, &csi.TopologyRequirement{Preferred: on("node-b").Requisite}))
	if err != nil {
		t.Errorf("a preferred topology with the source's node: %v", err)
	}
	// Same name, same size, another source: not the same volume.
	_, err = ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "clone", VolumeCapabilities: []*csi.VolumeCapability{blockCap()}, Parameters: dc("thin"),
		CapacityRange: &csi.CapacityRange{RequiredBytes: gib}, AccessibilityRequirements: on("node-b")})
	wantCode(t, "the clone's name without its source", err, codes.AlreadyExists, "different size or source")
}

// TestSnapshots: a snapshot is a read-only LogicalVolume of the source's size on its node; repeated it is the
// same; its name with another source is refused; deleting it (or one that is gone) succeeds.
func TestSnapshots(t *testing.T) {
	src := volume("src", "node-b", "thin")
	src.Status.CurrentSize = resource.NewQuantity(2*gib, resource.BinarySI) // grown since it was made
	other := volume("other", "node-b", "thin")
	a, ctl := newAgents(t, interceptor.Funcs{}, node("node-b", map[string]int64{"thin": gib}), src, other)
	ctx := callCtx(t)
	req := &csi.CreateSnapshotRequest{Name: "Snap-1", SourceVolumeId: "id-src"}
	resp, err := ctl.CreateSnapshot(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	lv := a.get(t, "snap-1")
	if lv.Spec.Source != "src" || lv.Spec.AccessType != "ro" || lv.Spec.NodeName != "node-b" || lv.Spec.DeviceClass != "thin" || lv.Spec.Size.Value() != 2*gib {
		t.Errorf("snapshot spec %+v", lv.Spec)
	}
	s := resp.GetSnapshot()
	if s.GetSnapshotId() != "id-snap-1" || s.GetSourceVolumeId() != "id-src" || s.GetSizeBytes() != 2*gib || !s.GetReadyToUse() || s.GetCreationTime().AsTime().IsZero() {
		t.Errorf("response %v", s)
	}
	if again, err := ctl.CreateSnapshot(ctx, req); err != nil || again.GetSnapshot().GetSnapshotId() != s.GetSnapshotId() {
		t.Errorf("the same snapshot again: %v, %v", again, err)
	}
	_, err = ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "id-other"})
	wantCode(t, "its name with another source", err, codes.AlreadyExists, "another source")
	_, err = ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-2", SourceVolumeId: "id-none"})
	wantCode(t, "no such source", err, codes.NotFound, "id-none")
	_, err = ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: "id-src"})
	wantCode(t, "no name", err, codes.InvalidArgument, "name")
	_, err = ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-3"})
	wantCode(t, "no source", err, codes.InvalidArgument, "source_volume_id")

	if _, err := ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "id-snap-1"}); err != nil {
		t.Fatal(err)
	}
	if err := a.c.Get(ctx, types.NamespacedName{Name: "snap-1"}, &topolvmv1.LogicalVolume{}); err == nil {
		t.Error("the snapshot's LogicalVolume is still there")
	}
	if _, err := ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "id-snap-1"}); err != nil {
		t.Errorf("deleting it again: %v", err)
	}
	_, err = ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{})
	wantCode(t, "no snapshot ID", err, codes.InvalidArgument, "snapshot_id")
}

// TestDeleteVolume: the LogicalVolume goes, and the call returns once it is gone; a volume that does not
// exist is deleted already; the API failing is Internal.
func TestDeleteVolume(t *testing.T) {
	a, ctl := newAgents(t, interceptor.Funcs{}, volume("v1", "node-a", "ssd"))
	ctx := callCtx(t)
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v1"}); err != nil {
		t.Fatal(err)
	}
	if err := a.c.Get(ctx, types.NamespacedName{Name: "v1"}, &topolvmv1.LogicalVolume{}); err == nil {
		t.Error("the LogicalVolume is still there")
	}
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v1"}); err != nil {
		t.Errorf("again: %v", err)
	}
	_, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{})
	wantCode(t, "no volume ID", err, codes.InvalidArgument, "volume_id")

	boom := errors.New("etcd is down")
	_, broken := newAgents(t, interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return boom }})
	_, err = broken.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v1"})
	wantCode(t, "listing failing", err, codes.Internal, "etcd is down")
	_, stuck := newAgents(t, interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error { return boom }},
		volume("v2", "node-a", "ssd"))
	_, err = stuck.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v2"})
	wantCode(t, "deleting failing", err, codes.Internal, "etcd is down")
}

// TestDeleteVolume_WaitsForTheNode: the call returns only once the node removed the LV (its finalizer); it
// times out with DeadlineExceeded while the node does not.
func TestDeleteVolume_WaitsForTheNode(t *testing.T) {
	v := volume("v1", "node-a", "ssd")
	v.Finalizers = []string{names.LogicalVolumeFinalizer()}
	a, ctl := newAgents(t, interceptor.Funcs{}, v)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "id-v1"})
	wantCode(t, "the node not removing it", err, codes.DeadlineExceeded, "removed by its node")

	done := make(chan error, 1)
	go func() {
		_, err := ctl.DeleteVolume(callCtx(t), &csi.DeleteVolumeRequest{VolumeId: "id-v1"})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned (%v) before the node removed the LV", err)
	default:
	}
	lv := a.get(t, "v1")
	lv.Finalizers = nil
	if err := a.c.Update(context.Background(), lv); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("once the node removed it: %v", err)
	}
}

// TestExpandVolume: the LogicalVolume's size is set and the call returns once the node grew it; a smaller or
// equal size changes nothing; a node without the room refuses; the file system grows on the node unless the
// volume is a block device.
func TestExpandVolume(t *testing.T) {
	a, ctl := newAgents(t, interceptor.Funcs{}, node("node-a", map[string]int64{"ssd": 2 * gib}),
		volume("v1", "node-a", "ssd"), volume("fail-grow", "node-a", "ssd"), volume("lost", "node-x", "ssd"))
	ctx := callCtx(t)
	resp, err := ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-v1", CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * gib},
		VolumeCapability: mountCap("ext4")})
	if err != nil {
		t.Fatal(err)
	}
	lv := a.get(t, "v1")
	if resp.GetCapacityBytes() != 3*gib || !resp.GetNodeExpansionRequired() || lv.Spec.Size.Value() != 3*gib || lv.Annotations[names.ResizeRequestedAt()] == "" {
		t.Errorf("grown to 3 GiB (2 GiB free): %v; spec %v, annotations %v", resp, lv.Spec.Size.String(), lv.Annotations)
	}
	resp, err = ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-v1", CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * gib},
		VolumeCapability: blockCap()})
	if err != nil || resp.GetCapacityBytes() != 3*gib || resp.GetNodeExpansionRequired() {
		t.Errorf("the same size again, a block volume: %v, %v", resp, err)
	}
	if again := a.get(t, "v1"); again.ResourceVersion != lv.ResourceVersion {
		t.Error("the same size again wrote the LogicalVolume (the node is asked to resize it again)")
	}
	_, err = ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-v1", CapacityRange: &csi.CapacityRange{RequiredBytes: 5*gib + 4096}})
	wantCode(t, "more than the node has free", err, codes.Internal, "not enough space on node node-a to grow volume id-v1 by 2147487744 bytes: 2147483648 bytes free")
	if _, err := ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-v1", CapacityRange: &csi.CapacityRange{RequiredBytes: 5 * gib}}); err != nil {
		t.Errorf("exactly the node's free bytes more: %v", err)
	}
	_, err = ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-fail-grow", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
	wantCode(t, "the node failing", err, codes.Internal, "lvextend failed")
	_, err = ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-lost", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
	wantCode(t, "its node gone", err, codes.Internal, "node-x")
	_, err = ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-none", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
	wantCode(t, "no such volume", err, codes.NotFound, "id-none")
	_, err = ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
	wantCode(t, "no volume ID", err, codes.InvalidArgument, "volume_id")
	_, err = ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-v1"})
	wantCode(t, "no capacity range", err, codes.InvalidArgument, "capacity_range")
	_, err = ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "id-v1", CapacityRange: &csi.CapacityRange{RequiredBytes: -1}})
	wantCode(t, "a negative size", err, codes.InvalidArgument, "negative")
}

// TestValidateAndCapacity: capabilities of an existing volume are confirmed or refused with the reason; the
// capacity is a node's (by its topology segment) or the sum over all nodes.
func TestValidateAndCapacity(t *testing.T) {
	_, ctl := newAgents(t, interceptor.Funcs{}, volume("v1", "node-a", "ssd"),
		node("node-a", map[string]int64{"ssd": 5 * gib}), node("node-b", map[string]int64{"ssd": 3 * gib, "hdd": gib}),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-c", Annotations: map[string]string{names.CapacityAnnotation("ssd"): "-1"}}})
	ctx := callCtx(t)
	ok, err := ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "id-v1", VolumeCapabilities: []*csi.VolumeCapability{blockCap()},
		VolumeContext: map[string]string{"k": "v"}})
	if err != nil || ok.GetConfirmed() == nil || ok.GetConfirmed().GetVolumeContext()["k"] != "v" {
		t.Errorf("a single-node block volume: %v, %v", ok, err)
	}
	multi := &csi.VolumeCapability{AccessType: blockCap().AccessType, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}}
	no, err := ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "id-v1", VolumeCapabilities: []*csi.VolumeCapability{multi}})
	if err != nil || no.GetConfirmed() != nil || !strings.Contains(no.GetMessage(), "single-node") {
		t.Errorf("a multi-node capability: %v, %v", no, err)
	}
	_, err = ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "id-none", VolumeCapabilities: []*csi.VolumeCapability{blockCap()}})
	wantCode(t, "no such volume", err, codes.NotFound, "id-none")
	_, err = ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeCapabilities: []*csi.VolumeCapability{blockCap()}})
	wantCode(t, "no volume ID", err, codes.InvalidArgument, "volume_id")
	_, err = ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "id-v1"})
	wantCode(t, "no capabilities", err, codes.InvalidArgument, "volume_capabilities")

	for what, tc := range map[string]struct {
		req  *csi.GetCapacityRequest
		want int64
	}{
		"all nodes":                          {&csi.GetCapacityRequest{Parameters: dc("ssd")}, 8 * gib},
		"one node":                           {&csi.GetCapacityRequest{Parameters: dc("ssd"), AccessibleTopology: &csi.Topology{Segments: map[string]string{names.TopologyKey(): "node-b"}}}, 3 * gib},
		"another device class":               {&csi.GetCapacityRequest{Parameters: dc("hdd"), AccessibleTopology: &csi.Topology{Segments: map[string]string{names.TopologyKey(): "node-b"}}}, gib},
		"an unknown node":                    {&csi.GetCapacityRequest{Parameters: dc("ssd"), AccessibleTopology: &csi.Topology{Segments: map[string]string{names.TopologyKey(): "node-x"}}}, 0},
		"a segment without the topology key": {&csi.GetCapacityRequest{Parameters: dc("ssd"), AccessibleTopology: &csi.Topology{Segments: map[string]string{"zone": "z"}}}, 0},
		"an unknown device class":            {&csi.GetCapacityRequest{Parameters: dc("nvme")}, 0},
	} {
		resp, err := ctl.GetCapacity(ctx, tc.req)
		if err != nil || resp.GetAvailableCapacity() != tc.want {
			t.Errorf("%s: %v, %v; want %d", what, resp, err, tc.want)
		}
	}
	caps, err := ctl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil || len(caps.GetCapabilities()) != 5 {
		t.Errorf("capabilities %v, %v", caps, err)
	}
}

// TestCreateVolume_PollsGently: waiting for a node that does not answer polls with backoff, the default one
// when none is configured: a few reads of the LogicalVolume, not a busy loop on the API server.
func TestCreateVolume_PollsGently(t *testing.T) {
	scheme, err := names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&topolvmv1.LogicalVolume{}).
		WithObjects(node("node-a", map[string]int64{"ssd": 10 * gib})).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*topolvmv1.LogicalVolume); ok {
				gets.Add(1)
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	for _, b := range []csicontroller.Backoff{{}, {Initial: -time.Second}} {
		gets.Store(0)
		ctl := csicontroller.NewController(c, nil, csicontroller.Options{Names: names, Backoff: b})
		ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
		_, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: fmt.Sprintf("pvc-%d", b.Initial), VolumeCapabilities: []*csi.VolumeCapability{blockCap()}, Parameters: dc("ssd")})
		cancel()
		wantCode(t, "a node that never answers", err, codes.DeadlineExceeded, "provisioned by its node")
		if n := gets.Load(); n < 2 || n > 6 {
			t.Errorf("backoff %+v: the LogicalVolume was read %d times in 350 ms; want the default backoff's few (0, 100, 300 ms)", b, n)
		}
	}
}

// TestNodeCapacity: a node's capacity annotation is read as bytes; a malformed one, or one beyond 2^62 bytes,
// counts as none; ties go to the lowest node name whatever order the nodes are listed in.
func TestNodeCapacity(t *testing.T) {
	ann := func(name, v string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{names.TopologyKey(): name},
			Annotations: map[string]string{names.CapacityAnnotation("ssd"): v}}}
	}
	reversed := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if nl, ok := list.(*corev1.NodeList); ok {
			slices.Reverse(nl.Items)
		}
		return nil
	}}
	_, ctl := newAgents(t, reversed, ann("a-limit", "4611686018427387904"), ann("b-over", "4611686018427387905"), ann("c-huge", "9223372036854775808"),
		ann("d-bad", "12Gi"), ann("e-neg", "-5"))
	ctx := callCtx(t)
	for node, want := range map[string]int64{"a-limit": 1 << 62, "b-over": 0, "c-huge": 0, "d-bad": 0, "e-neg": 0} {
		resp, err := ctl.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: dc("ssd"), AccessibleTopology: &csi.Topology{Segments: map[string]string{names.TopologyKey(): node}}})
		if err != nil || resp.GetAvailableCapacity() != want {
			t.Errorf("%s: %v, %v; want %d", node, resp, err, want)
		}
	}

	_, ctl = newAgents(t, reversed, node("node-a", map[string]int64{"hdd": gib}), node("node-b", map[string]int64{"hdd": 4 * gib}),
		node("node-c", map[string]int64{"hdd": 4 * gib}), node("node-d", map[string]int64{"hdd": 2 * gib}))
	resp, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-tie", VolumeCapabilities: []*csi.VolumeCapability{blockCap()}, Parameters: dc("hdd")})
	if err != nil || resp.GetVolume().GetAccessibleTopology()[0].GetSegments()[names.TopologyKey()] != "node-b" {
		t.Errorf("a tie listed in reverse: %v, %v; want node-b", resp, err)
	}
}
