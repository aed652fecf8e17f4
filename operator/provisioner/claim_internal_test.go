package provisioner

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/lvms-dev/lvms/api"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

// noCSI fails the test on any CSI call: the claims below are none of the provisioner's business.
type noCSI struct{ t *testing.T }

func (n noCSI) CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	n.t.Error("CreateVolume called")
	return nil, nil
}

func (n noCSI) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	n.t.Error("DeleteVolume called")
	return nil, nil
}

func (n noCSI) ControllerExpandVolume(context.Context, *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	n.t.Error("ControllerExpandVolume called")
	return nil, nil
}

func (n noCSI) CreateSnapshot(context.Context, *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	n.t.Error("CreateSnapshot called")
	return nil, nil
}

func (n noCSI) DeleteSnapshot(context.Context, *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	n.t.Error("DeleteSnapshot called")
	return nil, nil
}

// TestClaimReconciler_LeavesOtherClaimsAlone: one Reconcile each for claims the provisioner must not act on
// or speak to — being deleted, without a class, of another provisioner whose class is gone, bound already —
// makes no CSI call, creates no PV, records no event and asks for no retry. Called directly, so "nothing
// happened" is known when Reconcile returns rather than waited for.
func TestClaimReconciler_LeavesOtherClaimsAlone(t *testing.T) {
	names := driver.New(false)
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	ours := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms"}, Provisioner: names.Driver(), VolumeBindingMode: &wffc}
	class := func(s string) *string { return &s }
	claim := func(name string, sc *string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, UID: types.UID("uid-" + name),
			Annotations: map[string]string{storageProvisionerAnnotation: names.Driver(), driver.SelectedNodeAnnotation: "node-a"}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if mutate != nil {
			mutate(pvc)
		}
		return pvc
	}
	now := metav1.Now()
	for _, pvc := range []*corev1.PersistentVolumeClaim{
		claim("deleting", class("lvms"), func(p *corev1.PersistentVolumeClaim) {
			p.DeletionTimestamp, p.Finalizers = &now, []string{"kubernetes.io/pvc-protection"}
		}),
		claim("no-class", nil, nil),
		claim("empty-class", class(""), nil),
		claim("another-provisioners", class("gone"), func(p *corev1.PersistentVolumeClaim) {
			p.Annotations[storageProvisionerAnnotation] = "other.csi.example.com"
		}),
		claim("bound-class-gone", class("gone"), func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeName = "pvc-bound" }),
	} {
		t.Run(pvc.Name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(ours, pvc).Build()
			rec := events.NewFakeRecorder(10)
			p := New(Options{Names: names, CSI: noCSI{t}})
			p.client, p.reader, p.events = c, c, rec
			res, err := (&claimReconciler{p}).Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pvc)})
			if err != nil || res != (ctrl.Result{}) {
				t.Errorf("Reconcile: %+v, %v; want nothing to do", res, err)
			}
			pvs := &corev1.PersistentVolumeList{}
			if err := c.List(context.Background(), pvs); err != nil || len(pvs.Items) != 0 {
				t.Errorf("PVs %v (%v); want none", pvs.Items, err)
			}
			select {
			case e := <-rec.Events:
				t.Errorf("event %q; want none", e)
			default:
			}
		})
	}
}

// TestShortfall: the "not enough space" message names the node asked for (or, without one, the node with
// the most room, the first by name on a tie), its free space and what is missing; a node at 0 bytes free
// still counts as reporting.
func TestShortfall(t *testing.T) {
	names := driver.New(false)
	node := func(name string, free map[string]string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
		for dc, v := range free {
			n.Annotations[names.CapacityAnnotation(dc)] = v
		}
		return n
	}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(
		node("node-a", map[string]string{"ssd": "3221225472", "": "0", "hdd": "2147483648"}),
		node("node-b", map[string]string{"ssd": "1073741824", "": "0"}),
		node("node-c", map[string]string{"ssd": "2147483648", "hdd": "2147483648"}),
	).Build()
	p := New(Options{Names: names})
	p.client = c
	r := &claimReconciler{p}
	req := &csi.CreateVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 30}}
	sc := func(dc string) *storagev1.StorageClass {
		return &storagev1.StorageClass{Parameters: map[string]string{names.DeviceClassParam(): dc}}
	}
	for _, tc := range []struct {
		name, dc, node, want string
	}{
		{"the node asked for, listed after another", "ssd", "node-b",
			`Not enough space: 4Gi (4294967296 bytes) requested in device class "ssd" but node "node-b" has only 1Gi (1073741824 bytes) free, 3Gi (3221225472 bytes) short: request less, free space on the node, or add capacity (detail)`},
		{"no node asked for: the one with the most room", "ssd", "",
			`Not enough space: 4Gi (4294967296 bytes) requested in device class "ssd" but node "node-a" has only 3Gi (3221225472 bytes) free, 1Gi (1073741824 bytes) short: request less, free space on the node, or add capacity (detail)`},
		{"a tie: the first node by name", "hdd", "",
			`Not enough space: 4Gi (4294967296 bytes) requested in device class "hdd" but node "node-a" has only 2Gi (2147483648 bytes) free, 2Gi (2147483648 bytes) short: request less, free space on the node, or add capacity (detail)`},
		{"the default class, full", "", "node-a",
			`Not enough space: 4Gi (4294967296 bytes) requested in device class "00default" but node "node-a" has only 0 (0 bytes) free, 4Gi (4294967296 bytes) short: request less, free space on the node, or add capacity (detail)`},
		{"no node reports the class", "nvme", "",
			`Not enough space: 4Gi (4294967296 bytes) requested in device class "nvme" and no node reports capacity (detail)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.shortfall(context.Background(), req, sc(tc.dc), tc.node, "detail"); got != tc.want {
				t.Errorf("shortfall:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// okCSI creates every volume on node-a.
type okCSI struct {
	noCSI
	names driver.Names
}

func (o okCSI) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1", CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{o.names.TopologyKey(): "node-a"}}}}}, nil
}

// TestClaimReconciler_ProvisionsAndSaysWhere: a claim provisioned makes its PV and one Normal event naming the
// node, with no error and no retry.
func TestClaimReconciler_ProvisionsAndSaysWhere(t *testing.T) {
	names := driver.New(false)
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms"}, Provisioner: names.Driver(), VolumeBindingMode: &wffc}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "uid-data",
		Annotations: map[string]string{storageProvisionerAnnotation: names.Driver(), driver.SelectedNodeAnnotation: "node-a"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(sc, pvc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}).Build()
	rec := events.NewFakeRecorder(10)
	p := New(Options{Names: names, CSI: okCSI{noCSI{t}, names}})
	p.client, p.reader, p.events = c, c, rec
	res, err := (&claimReconciler{p}).Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pvc)})
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("Reconcile: %+v, %v; want done", res, err)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "pvc-uid-data"}, pv); err != nil || pv.Spec.CSI.VolumeHandle != "vol-1" {
		t.Errorf("PV %+v, %v; want pvc-uid-data for vol-1", pv.Spec.CSI, err)
	}
	select {
	case e := <-rec.Events:
		if want := "Normal ProvisioningSucceeded Successfully provisioned volume pvc-uid-data on node node-a"; e != want {
			t.Errorf("event %q, want %q", e, want)
		}
	default:
		t.Error("no event; want ProvisioningSucceeded")
	}
}

// TestProvisionFailed_NotEnoughSpace: a node out of space with a claim waiting for its first consumer sends
// the claim back to the scheduler (the selected node removed, no retry of its own); without a selected node
// it retries later; a failure to send it back is returned.
func TestProvisionFailed_NotEnoughSpace(t *testing.T) {
	names := driver.New(false)
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms"}, Provisioner: names.Driver()}
	req := &csi.CreateVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}}
	noSpace := status.Error(codes.ResourceExhausted, "no space")
	for _, tc := range []struct {
		name      string
		node      string
		failPatch bool
		want      ctrl.Result
		wantErr   bool
	}{
		{name: "selected node: back to the scheduler", node: "node-a"},
		{name: "no selected node: retried", want: ctrl.Result{RequeueAfter: retryAfter}},
		{name: "the claim cannot be sent back", node: "node-a", failPatch: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", Annotations: map[string]string{}}}
			if tc.node != "" {
				pvc.Annotations[driver.SelectedNodeAnnotation] = tc.node
			}
			b := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(pvc)
			if tc.failPatch {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
					return errors.New("the API server is unavailable")
				}})
			}
			c := b.Build()
			rec := events.NewFakeRecorder(10)
			p := New(Options{Names: names})
			p.client, p.events = c, rec
			res, err := (&claimReconciler{p}).provisionFailed(context.Background(), pvc.DeepCopy(), sc, req, tc.node, noSpace)
			if res != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("provisionFailed: %+v, %v; want %+v, error %v", res, err, tc.want, tc.wantErr)
			}
			cur := &corev1.PersistentVolumeClaim{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(pvc), cur); err != nil {
				t.Fatal(err)
			}
			if _, still := cur.Annotations[driver.SelectedNodeAnnotation]; still != (tc.node != "" && tc.failPatch) {
				t.Errorf("selected node annotation still there: %v", still)
			}
			if e := <-rec.Events; !strings.Contains(e, "Warning ProvisioningFailed Not enough space") {
				t.Errorf("event %q; want the shortfall", e)
			}
		})
	}
}

// TestContentSource_DataSourceAlone: a claim with only spec.dataSource (what API servers before
// dataSourceRef's mirroring keep) is read like one with dataSourceRef: a missing snapshot is refused by name
// rather than provisioned empty.
func TestContentSource_DataSourceAlone(t *testing.T) {
	group := "snapshot.storage.k8s.io"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "restored"},
		Spec: corev1.PersistentVolumeClaimSpec{DataSource: &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "gone"}}}
	p := New(Options{Names: driver.New(false)})
	p.client = fake.NewClientBuilder().WithScheme(api.NewScheme()).Build()
	src, err := (&claimReconciler{p}).contentSource(context.Background(), pvc)
	var ue userError
	if src != nil || !asUserError(err, &ue) || !strings.Contains(ue.msg, `Data source VolumeSnapshot "gone"`) {
		t.Errorf("contentSource: %v, %v; want the missing snapshot named", src, err)
	}
}

// TestContentSource_SnapshotNotReady: a snapshot whose status lacks its content or its readiness is "not
// ready to use yet", whichever is missing.
func TestContentSource_SnapshotNotReady(t *testing.T) {
	scheme := api.NewScheme()
	if err := snapshotv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	group, content, yes := snapshotv1.GroupName, "content-1", true
	for _, tc := range []struct {
		name   string
		status *snapshotv1.VolumeSnapshotStatus
	}{
		{"no status", nil},
		{"ready but no content", &snapshotv1.VolumeSnapshotStatus{ReadyToUse: &yes}},
		{"content but no readiness", &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "snap"}, Status: tc.status}
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "restored"},
				Spec: corev1.PersistentVolumeClaimSpec{DataSourceRef: &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "snap"}}}
			p := New(Options{Names: driver.New(false)})
			p.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(vs).Build()
			src, err := (&claimReconciler{p}).contentSource(context.Background(), pvc)
			var ue userError
			if src != nil || !asUserError(err, &ue) || !strings.Contains(ue.msg, "is not ready to use yet") {
				t.Errorf("contentSource: %v, %v; want not ready to use yet", src, err)
			}
		})
	}
}

// TestOwnershipChecks: a PV is a claim's only when its claimRef names that claim's UID, namespace and name
// all three, and a snapshot content is a snapshot's only when its volumeSnapshotRef does; one field off (a
// claim re-created under the same name, the same name in another namespace) is someone else's.
func TestOwnershipChecks(t *testing.T) {
	names := driver.New(false)
	r := &claimReconciler{New(Options{Names: names})}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "uid-1"}}
	vs := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "snap", UID: "uid-2"}}
	yes, handle := true, "snap-1"
	for _, tc := range []struct {
		name      string
		uid       types.UID
		namespace string
		object    string
		want      bool
	}{
		{"all three", "", "", "", true},
		{"another UID (re-created under the name)", "uid-9", "", "", false},
		{"another namespace", "", "victim", "", false},
		{"another name", "", "", "other", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := &corev1.ObjectReference{UID: cmp.Or(tc.uid, pvc.UID), Namespace: cmp.Or(tc.namespace, pvc.Namespace), Name: cmp.Or(tc.object, pvc.Name)}
			if got := claimedBy(&corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{ClaimRef: ref}}, pvc); got != tc.want {
				t.Errorf("claimedBy = %v, want %v", got, tc.want)
			}
			content := &snapshotv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "content-1"},
				Spec: snapshotv1.VolumeSnapshotContentSpec{Driver: names.Driver(), VolumeSnapshotRef: corev1.ObjectReference{
					UID: cmp.Or(tc.uid, vs.UID), Namespace: cmp.Or(tc.namespace, vs.Namespace), Name: cmp.Or(tc.object, vs.Name)}},
				Status: &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &yes}}
			if err := r.checkSnapshotContent(vs, content); (err == nil) != tc.want {
				t.Errorf("checkSnapshotContent: %v, want accepted %v", err, tc.want)
			}
		})
	}
	if claimedBy(&corev1.PersistentVolume{}, pvc) {
		t.Error("a PV without a claimRef is claimed")
	}
}

// TestCheckSnapshotContent_NotReady: a content of this snapshot and driver restores only with a status, a
// snapshot handle and readiness true; any one of them missing or false is "not ready to use yet".
func TestCheckSnapshotContent_NotReady(t *testing.T) {
	names := driver.New(false)
	r := &claimReconciler{New(Options{Names: names})}
	vs := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "snap", UID: "uid-2"}}
	yes, no, handle := true, false, "snap-1"
	for _, tc := range []struct {
		name   string
		status *snapshotv1.VolumeSnapshotContentStatus
		ready  bool
	}{
		{"ready", &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &yes}, true},
		{"no status", nil, false},
		{"no handle", &snapshotv1.VolumeSnapshotContentStatus{ReadyToUse: &yes}, false},
		{"no readiness", &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle}, false},
		{"not ready", &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &no}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := &snapshotv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "content-1"},
				Spec: snapshotv1.VolumeSnapshotContentSpec{Driver: names.Driver(),
					VolumeSnapshotRef: corev1.ObjectReference{UID: vs.UID, Namespace: vs.Namespace, Name: vs.Name}},
				Status: tc.status}
			err := r.checkSnapshotContent(vs, content)
			if tc.ready && err != nil {
				t.Errorf("checkSnapshotContent: %v, want accepted", err)
			}
			var ue userError
			if !tc.ready && (!asUserError(err, &ue) || !strings.Contains(ue.msg, "is not ready to use yet")) {
				t.Errorf("checkSnapshotContent: %v, want not ready to use yet", err)
			}
		})
	}
}

// expandCSI records ControllerExpandVolume requests and grows every volume as asked.
type expandCSI struct {
	noCSI
	requests []*csi.ControllerExpandVolumeRequest
}

func (e *expandCSI) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	e.requests = append(e.requests, req)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: req.GetCapacityRange().GetRequiredBytes(), NodeExpansionRequired: req.GetVolumeCapability().GetMount() != nil}, nil
}

// growingClaim is a Bound claim of class sc asking for 2Gi and its 1Gi xfs PV of this driver.
func growingClaim(names driver.Names, sc *storagev1.StorageClass) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "uid-data"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc.Name, VolumeName: "pvc-data",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-data"},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			ClaimRef:               &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: names.Driver(), VolumeHandle: "vol-1", FSType: "xfs"}}}}
	return pvc, pv
}

// TestResize_OnlyOwnBoundClaimsOfThisDriver: a claim grows its volume only when the PV is this driver's,
// its claimRef names the claim and the claim is Bound; otherwise no CSI call is made and the PV keeps its
// size. A raw block volume is grown as a block volume, with no file system to grow on the node.
func TestResize_OnlyOwnBoundClaimsOfThisDriver(t *testing.T) {
	names := driver.New(false)
	yes := true
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms"}, Provisioner: names.Driver(), AllowVolumeExpansion: &yes}
	block := corev1.PersistentVolumeBlock
	for _, tc := range []struct {
		name       string
		mutatePV   func(*corev1.PersistentVolume)
		mutatePVC  func(*corev1.PersistentVolumeClaim)
		wantGrow   bool
		wantBlock  bool
		wantReason string
	}{
		{name: "own bound claim", wantGrow: true},
		{name: "raw block volume", mutatePV: func(pv *corev1.PersistentVolume) { pv.Spec.VolumeMode = &block }, wantGrow: true, wantBlock: true},
		{name: "another driver's PV", mutatePV: func(pv *corev1.PersistentVolume) { pv.Spec.CSI.Driver = "other.csi.example.com" }},
		{name: "a PV without CSI", mutatePV: func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI = nil
			pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/data"}
		}},
		{name: "bound claim naming another claim's PV", mutatePV: func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.UID = "uid-victim" },
			wantReason: "VolumeResizeRefused"},
		{name: "own PV, claim not Bound", mutatePVC: func(pvc *corev1.PersistentVolumeClaim) { pvc.Status.Phase = corev1.ClaimPending },
			wantReason: "VolumeResizeRefused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc, pv := growingClaim(names, sc)
			if tc.mutatePV != nil {
				tc.mutatePV(pv)
			}
			if tc.mutatePVC != nil {
				tc.mutatePVC(pvc)
			}
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(sc, pvc, pv).WithStatusSubresource(pvc).Build()
			rec := events.NewFakeRecorder(10)
			fakeCSI := &expandCSI{noCSI: noCSI{t}}
			p := New(Options{Names: names, CSI: fakeCSI})
			p.client, p.reader, p.events = c, c, rec
			if _, err := (&claimReconciler{p}).resize(context.Background(), pvc, sc); err != nil {
				t.Fatalf("resize: %v", err)
			}
			got := &corev1.PersistentVolume{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(pv), got); err != nil {
				t.Fatal(err)
			}
			size := got.Spec.Capacity[corev1.ResourceStorage]
			if grew := len(fakeCSI.requests) == 1 && size.Cmp(resource.MustParse("2Gi")) == 0; grew != tc.wantGrow {
				t.Errorf("grown: %d ControllerExpandVolume calls, PV capacity %s; want grown %v", len(fakeCSI.requests), size.String(), tc.wantGrow)
			}
			if tc.wantGrow {
				req := fakeCSI.requests[0]
				if isBlock := req.GetVolumeCapability().GetBlock() != nil; isBlock != tc.wantBlock || req.GetVolumeId() != "vol-1" {
					t.Errorf("request %v; want a block capability %v for vol-1", req, tc.wantBlock)
				}
				var claim corev1.PersistentVolumeClaim
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(pvc), &claim); err != nil {
					t.Fatal(err)
				}
				pending := slices.ContainsFunc(claim.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
					return c.Type == corev1.PersistentVolumeClaimFileSystemResizePending
				})
				if pending == tc.wantBlock {
					t.Errorf("FileSystemResizePending on the claim: %v; a block volume has no file system to grow, a mounted one has", pending)
				}
			}
			var events []string
			for len(rec.Events) > 0 {
				events = append(events, <-rec.Events)
			}
			if tc.wantReason != "" && !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, tc.wantReason) }) {
				t.Errorf("events %q; want %s", events, tc.wantReason)
			}
		})
	}
}

// TestVolumesOf: a claim's change looks at the PV provisioned for it, and at the PV it is bound to when that
// is another one; an unbound claim names no second PV.
func TestVolumesOf(t *testing.T) {
	claim := func(volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "uid-1"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	}
	for volume, want := range map[string][]string{
		"":          {"pvc-uid-1"},
		"pvc-uid-1": {"pvc-uid-1"},
		"by-hand":   {"pvc-uid-1", "by-hand"},
	} {
		var got []string
		for _, r := range volumesOf(claim(volume)) {
			got = append(got, r.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("claim bound to %q: PVs %v, want %v", volume, got, want)
		}
	}
}

// TestVolumeReconciler_LeavesOtherVolumesAlone: a released PV with the Delete policy is deleted only when it
// is this driver's; another driver's, or one without CSI, makes no CSI call and stays.
func TestVolumeReconciler_LeavesOtherVolumesAlone(t *testing.T) {
	names := driver.New(false)
	for name, source := range map[string]corev1.PersistentVolumeSource{
		"another driver's": {CSI: &corev1.CSIPersistentVolumeSource{Driver: "other.csi.example.com", VolumeHandle: "their-volume"}},
		"without CSI":      {HostPath: &corev1.HostPathVolumeSource{Path: "/data"}},
	} {
		t.Run(name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
				Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, PersistentVolumeSource: source,
					ClaimRef: &corev1.ObjectReference{Namespace: "tenant", Name: "gone", UID: "uid-gone"}},
				Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased}}
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(pv).Build()
			p := New(Options{Names: names, CSI: noCSI{t}})
			p.client, p.reader, p.events = c, c, events.NewFakeRecorder(10)
			if _, err := (&volumeReconciler{p}).Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pv)}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{}); err != nil {
				t.Errorf("the PV is gone (%v): it is not this driver's to delete", err)
			}
		})
	}
}

// deleteCSI records DeleteVolume requests and succeeds.
type deleteCSI struct {
	noCSI
	deleted []string
}

func (d *deleteCSI) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d.deleted = append(d.deleted, req.GetVolumeId())
	return &csi.DeleteVolumeResponse{}, nil
}

// TestVolumeReconciler_DeletesOnlyReleased: this driver's PV with the Delete policy loses its volume and goes
// only once its claim is gone (Released, or the claim it names by UID no longer exists, re-created under the
// name or not); a PV waiting for its claim (no claimRef, or one without a UID) and a PV whose claim is there
// keep their data. A successful deletion is not an error.
func TestVolumeReconciler_DeletesOnlyReleased(t *testing.T) {
	names := driver.New(false)
	for _, tc := range []struct {
		name    string
		phase   corev1.PersistentVolumePhase
		ref     *corev1.ObjectReference
		claim   *corev1.PersistentVolumeClaim
		deleted bool
	}{
		{name: "released", phase: corev1.VolumeReleased, ref: &corev1.ObjectReference{Namespace: "tenant", Name: "data", UID: "uid-1"}, deleted: true},
		{name: "claim gone", phase: corev1.VolumeBound, ref: &corev1.ObjectReference{Namespace: "tenant", Name: "data", UID: "uid-1"}, deleted: true},
		{name: "claim re-created under the name", phase: corev1.VolumeBound, ref: &corev1.ObjectReference{Namespace: "tenant", Name: "data", UID: "uid-1"},
			claim: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "uid-2"}}, deleted: true},
		{name: "claim there", phase: corev1.VolumeBound, ref: &corev1.ObjectReference{Namespace: "tenant", Name: "data", UID: "uid-1"},
			claim: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "uid-1"}}},
		{name: "pre-bound, waiting for its claim", phase: corev1.VolumeAvailable, ref: &corev1.ObjectReference{Namespace: "tenant", Name: "data"}},
		{name: "no claimRef", phase: corev1.VolumeAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-1"},
				Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, ClaimRef: tc.ref,
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: names.Driver(), VolumeHandle: "vol-1"}}},
				Status: corev1.PersistentVolumeStatus{Phase: tc.phase}}
			objs := []client.Object{pv}
			if tc.claim != nil {
				objs = append(objs, tc.claim)
			}
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build()
			fakeCSI := &deleteCSI{noCSI: noCSI{t}}
			p := New(Options{Names: names, CSI: fakeCSI})
			p.client, p.reader, p.events = c, c, events.NewFakeRecorder(10)
			res, err := (&volumeReconciler{p}).Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pv)})
			if err != nil || res != (ctrl.Result{}) {
				t.Errorf("Reconcile: %+v, %v; want done", res, err)
			}
			gone := apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{}))
			if gone != tc.deleted || (len(fakeCSI.deleted) == 1) != tc.deleted {
				t.Errorf("PV gone %v, volumes deleted %v; want deleted %v", gone, fakeCSI.deleted, tc.deleted)
			}
		})
	}
}

// failingCSI fails expansions and deletions with its error.
type failingCSI struct {
	noCSI
	err error
}

func (f failingCSI) ControllerExpandVolume(context.Context, *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	return nil, f.err
}

func (f failingCSI) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return nil, f.err
}

// TestInUseRetriesAtASteadyPace: a volume in use (FailedPrecondition: a shared volume active on a node) is
// grown or deleted again after InUseRetry, without an error and its growing backoff; any other failure is
// an error, retried with backoff. Both leave an event saying why.
func TestInUseRetriesAtASteadyPace(t *testing.T) {
	names := driver.New(false)
	yes := true
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms"}, Provisioner: names.Driver(), AllowVolumeExpansion: &yes}
	for _, tc := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"in use", status.Error(codes.FailedPrecondition, "volume is active on node-b"), false},
		{"agent down", status.Error(codes.Unavailable, "node agent not answering"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc, pv := growingClaim(names, sc)
			pv.Spec.PersistentVolumeReclaimPolicy, pv.Status.Phase = corev1.PersistentVolumeReclaimDelete, corev1.VolumeReleased
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(sc, pvc, pv).Build()
			rec := events.NewFakeRecorder(10)
			p := New(Options{Names: names, CSI: failingCSI{noCSI{t}, tc.err}, InUseRetry: 7 * time.Second})
			p.client, p.reader, p.events = c, c, rec
			check := func(what string, res ctrl.Result, err error) {
				t.Helper()
				if (err != nil) != tc.wantErr || (res.RequeueAfter == 7*time.Second) == tc.wantErr {
					t.Errorf("%s: %+v, %v; want an error %v, else a retry after InUseRetry", what, res, err, tc.wantErr)
				}
				if len(rec.Events) == 0 {
					t.Errorf("%s: no event", what)
				}
				for len(rec.Events) > 0 {
					<-rec.Events
				}
			}
			res, err := (&claimReconciler{p}).resize(context.Background(), pvc, sc)
			check("resize", res, err)
			res, err = (&volumeReconciler{p}).Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pv)})
			check("delete", res, err)
		})
	}
}
