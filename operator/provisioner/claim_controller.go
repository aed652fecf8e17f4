package provisioner

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

// Annotations the Kubernetes volume machinery uses.
const (
	storageProvisionerAnnotation     = "volume.kubernetes.io/storage-provisioner"
	betaStorageProvisionerAnnotation = "volume.beta.kubernetes.io/storage-provisioner"
	provisionedByAnnotation          = "pv.kubernetes.io/provisioned-by"
	// retryAfter is how soon a PVC that needs the user's action is looked at again.
	retryAfter = 30 * time.Second
)

// claimReconciler provisions and grows volumes for PVCs.
type claimReconciler struct{ *Provisioner }

func (r *claimReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(r.named("claim")).For(&corev1.PersistentVolumeClaim{}).
		WithOptions(r.controllerOptions()).Complete(r)
}

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumeclaims/status;persistentvolumes;nodes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile implements reconcile.Reconciler.
func (r *claimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deprecated := r.opts.Names.DeprecatedClaimFinalizer()
	if kept := slices.DeleteFunc(slices.Clone(pvc.Finalizers), func(f string) bool { return f == deprecated }); len(kept) != len(pvc.Finalizers) {
		// The patch's own event brings the claim back for the rest. The optimistic lock keeps finalizers
		// others add meanwhile (the shared driver's provisioner may be removing the same one).
		base := pvc.DeepCopy()
		pvc.Finalizers = kept
		return ctrl.Result{}, client.IgnoreNotFound(r.client.Patch(ctx, pvc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
	}
	if !pvc.DeletionTimestamp.IsZero() || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return ctrl.Result{}, nil
	}
	sc := &storagev1.StorageClass{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: *pvc.Spec.StorageClassName}, sc); apierrors.IsNotFound(err) {
		if r.addressedToUs(pvc) && pvc.Spec.VolumeName == "" {
			r.warn(pvc, "ProvisioningFailed", "Provision", "StorageClass %q does not exist: create it or change the claim's storageClassName", *pvc.Spec.StorageClassName)
			return ctrl.Result{RequeueAfter: retryAfter}, nil
		}
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("get StorageClass %s: %w", *pvc.Spec.StorageClassName, err)
	}
	if sc.Provisioner != r.driver() {
		return ctrl.Result{}, nil
	}
	if pvc.Spec.VolumeName != "" {
		return r.resize(ctx, pvc, sc)
	}
	return r.provision(ctx, pvc, sc)
}

func (r *claimReconciler) addressedToUs(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Annotations[storageProvisionerAnnotation] == r.driver() ||
		pvc.Annotations[betaStorageProvisionerAnnotation] == r.driver()
}

func (r *claimReconciler) warn(pvc *corev1.PersistentVolumeClaim, reason, action, format string, args ...any) {
	r.events.Eventf(pvc, nil, corev1.EventTypeWarning, reason, action, format, args...)
}

// provision creates the volume and its PV.
func (r *claimReconciler) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (ctrl.Result, error) {
	pvName := "pvc-" + string(pvc.UID)
	if err := r.client.Get(ctx, types.NamespacedName{Name: pvName}, &corev1.PersistentVolume{}); err == nil {
		return ctrl.Result{}, nil // provisioned already; binding is the PV controller's job
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get PV %s: %w", pvName, err)
	}
	node := ""
	if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
		if node = pvc.Annotations[driver.SelectedNodeAnnotation]; node == "" {
			return ctrl.Result{}, nil // the scheduler has not chosen a node yet
		}
		if err := r.client.Get(ctx, types.NamespacedName{Name: node}, &corev1.Node{}); apierrors.IsNotFound(err) {
			r.warn(pvc, "ProvisioningFailed", "Provision", "The selected node %q does not exist any more: the scheduler will choose another node", node)
			return ctrl.Result{}, r.reschedule(ctx, pvc)
		} else if err != nil {
			return ctrl.Result{}, fmt.Errorf("get node %s: %w", node, err)
		}
	}
	req, err := r.createRequest(ctx, pvc, sc, pvName, node)
	if err != nil {
		var ue userError
		if asUserError(err, &ue) {
			r.warn(pvc, "ProvisioningFailed", "Provision", "%s", ue.msg)
			return ctrl.Result{RequeueAfter: retryAfter}, nil
		}
		return ctrl.Result{}, err
	}
	resp, err := r.opts.CSI.CreateVolume(ctx, req)
	if err != nil {
		return r.provisionFailed(ctx, pvc, sc, req, node, err)
	}
	pv := r.persistentVolume(pvc, sc, pvName, req, resp.GetVolume())
	if err := r.client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("create PV %s: %w", pvName, err)
	}
	start := pvc.CreationTimestamp.Time
	r.latency.Observe(time.Since(start).Seconds())
	where := "on node " + nodeOf(resp.GetVolume())
	if r.opts.Shared {
		where = "on a shared volume group (no node topology: any node in its lockspace can use it)"
	}
	r.events.Eventf(pvc, nil, corev1.EventTypeNormal, "ProvisioningSucceeded", "Provision", "Successfully provisioned volume %s %s", pvName, where)
	return ctrl.Result{}, nil
}

func nodeOf(v *csi.Volume) string {
	for _, t := range v.GetAccessibleTopology() {
		for _, n := range t.GetSegments() {
			return n
		}
	}
	return ""
}

// reschedule removes the selected-node annotation so the scheduler picks a node again.
func (r *claimReconciler) reschedule(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	base := pvc.DeepCopy()
	delete(pvc.Annotations, driver.SelectedNodeAnnotation)
	if err := r.client.Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("remove the selected node from PVC %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

// provisionFailed reports a CreateVolume failure on the PVC.
func (r *claimReconciler) provisionFailed(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass,
	req *csi.CreateVolumeRequest, node string, err error) (ctrl.Result, error) {
	st := status.Convert(err)
	switch st.Code() {
	case codes.ResourceExhausted:
		if r.opts.Shared {
			// One volume group for every node: another node has no more space, so the scheduler is not asked again.
			r.warn(pvc, "ProvisioningFailed", "Provision", "Not enough space: %s: request less, remove volumes, or grow the LUN", st.Message())
			return ctrl.Result{RequeueAfter: retryAfter}, nil
		}
		r.warn(pvc, "ProvisioningFailed", "Provision", "%s", r.shortfall(ctx, req, sc, node, st.Message()))
		if node != "" {
			return ctrl.Result{}, r.reschedule(ctx, pvc)
		}
		return ctrl.Result{RequeueAfter: retryAfter}, nil
	case codes.InvalidArgument, codes.NotFound, codes.OutOfRange, codes.Unimplemented, codes.AlreadyExists:
		r.warn(pvc, "ProvisioningFailed", "Provision", "Cannot provision the volume: %s", st.Message())
		return ctrl.Result{RequeueAfter: retryAfter}, nil
	case codes.DeadlineExceeded:
		where := "the chosen node"
		if node != "" {
			where = fmt.Sprintf("node %q", node)
		}
		r.warn(pvc, "ProvisioningFailed", "Provision", "The LVMS node agent on %s did not answer within %s: check that it runs; provisioning is retried with backoff (%s)",
			where, r.opts.CallTimeout, st.Message())
		return ctrl.Result{}, fmt.Errorf("provision PVC %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	r.warn(pvc, "ProvisioningFailed", "Provision", "Provisioning failed and will be retried: %s", st.Message())
	return ctrl.Result{}, fmt.Errorf("provision PVC %s/%s: %w", pvc.Namespace, pvc.Name, err)
}

// shortfall says how much space is missing, from the nodes' capacity annotations.
func (r *claimReconciler) shortfall(ctx context.Context, req *csi.CreateVolumeRequest, sc *storagev1.StorageClass, node, detail string) string {
	want := req.GetCapacityRange().GetRequiredBytes()
	dc := sc.Parameters[r.opts.Names.DeviceClassParam()]
	where, free := node, int64(-1)
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes); err == nil {
		for _, n := range nodes.Items {
			if node != "" && n.Name != node {
				continue
			}
			if c := capacityOf(&n, r.opts.Names, dc); c > free {
				where, free = n.Name, c
			}
		}
	}
	class := dc
	if class == "" {
		class = driver.DefaultDeviceClassKey
	}
	if free < 0 {
		return fmt.Sprintf("Not enough space: %s requested in device class %q and no node reports capacity (%s)", bytes(want), class, detail)
	}
	if free >= want {
		// The capacity the node last published fits the request, so the node agent's answer is what says why
		// (a thin pool past its usage threshold, capacity that changed since).
		return fmt.Sprintf("Not enough space: %s requested in device class %q on node %q: %s", bytes(want), class, where, detail)
	}
	return fmt.Sprintf("Not enough space: %s requested in device class %q but node %q has only %s free, %s short: request less, free space on the node, or add capacity (%s)",
		bytes(want), class, where, bytes(free), bytes(max(want-free, 0)), detail)
}

func bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String() + fmt.Sprintf(" (%d bytes)", n)
}

// userError is a problem only the user can fix.
type userError struct{ msg string }

func (e userError) Error() string { return e.msg }

func asUserError(err error, out *userError) bool {
	ue, ok := err.(userError)
	if ok {
		*out = ue
	}
	return ok
}

// createRequest builds the CreateVolume request for a PVC.
func (r *claimReconciler) createRequest(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, name, node string) (*csi.CreateVolumeRequest, error) {
	mode, err := r.accessMode(pvc)
	if err != nil {
		return nil, err
	}
	capability := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if isBlock(pvc) {
		capability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		capability.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{
			FsType: sc.Parameters[driver.FSTypeParam], MountFlags: sc.MountOptions}}
	}
	params := map[string]string{}
	for k, v := range sc.Parameters {
		if !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			params[k] = v
		}
	}
	req := &csi.CreateVolumeRequest{Name: name, Parameters: params, VolumeCapabilities: []*csi.VolumeCapability{capability}}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		req.CapacityRange = &csi.CapacityRange{RequiredBytes: q.Value()}
	}
	if q, ok := pvc.Spec.Resources.Limits[corev1.ResourceStorage]; ok {
		if req.CapacityRange == nil {
			req.CapacityRange = &csi.CapacityRange{}
		}
		req.CapacityRange.LimitBytes = q.Value()
	}
	if node != "" && !r.opts.Shared {
		t := []*csi.Topology{{Segments: map[string]string{r.opts.Names.TopologyKey(): node}}}
		req.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: t, Preferred: t}
	}
	src, err := r.contentSource(ctx, pvc)
	if err != nil {
		return nil, err
	}
	req.VolumeContentSource = src
	return req, nil
}

func isBlock(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock
}

// accessMode is the CSI access mode for a claim's access modes: single-node for ReadWriteOnce and
// ReadWriteOncePod; on the shared driver, multi-node for ReadWriteMany raw block volumes (VM live
// migration), never for a file system.
func (r *claimReconciler) accessMode(pvc *corev1.PersistentVolumeClaim) (csi.VolumeCapability_AccessMode_Mode, error) {
	mode := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	for _, m := range pvc.Spec.AccessModes {
		switch {
		case m == corev1.ReadWriteOnce || m == corev1.ReadWriteOncePod:
		case m == corev1.ReadWriteMany && r.opts.Shared && isBlock(pvc):
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		case m == corev1.ReadWriteMany && r.opts.Shared:
			return mode, userError{fmt.Sprintf("Access mode ReadWriteMany on %s needs volumeMode: Block (a raw block volume, which VM live migration uses): a file system on a shared volume is ReadWriteOnce", r.driver())}
		case r.opts.Shared:
			return mode, userError{fmt.Sprintf("Access mode %s is not supported by %s: use ReadWriteOnce, ReadWriteOncePod, or ReadWriteMany with volumeMode: Block", m, r.driver())}
		default:
			return mode, userError{fmt.Sprintf("Access mode %s is not supported by %s: use ReadWriteOnce or ReadWriteOncePod", m, r.driver())}
		}
	}
	return mode, nil
}

// contentSource resolves a PVC's data source (a VolumeSnapshot or a PVC of this driver).
func (r *claimReconciler) contentSource(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*csi.VolumeContentSource, error) {
	ds := pvc.Spec.DataSourceRef
	if ds == nil && pvc.Spec.DataSource != nil {
		ds = &corev1.TypedObjectReference{APIGroup: pvc.Spec.DataSource.APIGroup, Kind: pvc.Spec.DataSource.Kind, Name: pvc.Spec.DataSource.Name}
	}
	if ds == nil {
		return nil, nil
	}
	group := ""
	if ds.APIGroup != nil {
		group = *ds.APIGroup
	}
	// With the CrossNamespaceVolumeDataSource gate a claim may name a source in another namespace; that needs
	// a ReferenceGrant this provisioner does not check, so it is refused rather than read from this namespace.
	if ds.Namespace != nil && *ds.Namespace != "" && *ds.Namespace != pvc.Namespace {
		return nil, userError{fmt.Sprintf("Data source %s %q is in namespace %q: %s clones and restores only within the claim's namespace; copy the data into %q first",
			ds.Kind, ds.Name, *ds.Namespace, r.driver(), pvc.Namespace)}
	}
	switch {
	case group == snapshotv1.GroupName && ds.Kind == "VolumeSnapshot":
		vs := &snapshotv1.VolumeSnapshot{}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: pvc.Namespace, Name: ds.Name}, vs); err != nil {
			return nil, userError{fmt.Sprintf("Data source VolumeSnapshot %q: %v", ds.Name, err)}
		}
		if vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil || vs.Status.ReadyToUse == nil || !*vs.Status.ReadyToUse {
			return nil, userError{fmt.Sprintf("Data source VolumeSnapshot %q is not ready to use yet", ds.Name)}
		}
		content := &snapshotv1.VolumeSnapshotContent{}
		if err := r.client.Get(ctx, types.NamespacedName{Name: *vs.Status.BoundVolumeSnapshotContentName}, content); err != nil {
			return nil, fmt.Errorf("get VolumeSnapshotContent %s: %w", *vs.Status.BoundVolumeSnapshotContentName, err)
		}
		if err := r.checkSnapshotContent(vs, content); err != nil {
			return nil, err
		}
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: *content.Status.SnapshotHandle}}}, nil
	case group == "" && ds.Kind == "PersistentVolumeClaim":
		src := &corev1.PersistentVolumeClaim{}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: pvc.Namespace, Name: ds.Name}, src); err != nil {
			return nil, userError{fmt.Sprintf("Data source PVC %q: %v", ds.Name, err)}
		}
		if src.Status.Phase != corev1.ClaimBound || src.Spec.VolumeName == "" {
			return nil, userError{fmt.Sprintf("Data source PVC %q is not bound yet: clone it once it is Bound", ds.Name)}
		}
		pv := &corev1.PersistentVolume{}
		if err := r.client.Get(ctx, types.NamespacedName{Name: src.Spec.VolumeName}, pv); apierrors.IsNotFound(err) {
			return nil, userError{fmt.Sprintf("Data source PVC %q names PersistentVolume %q, which does not exist", ds.Name, src.Spec.VolumeName)}
		} else if err != nil {
			return nil, fmt.Errorf("get PV %s: %w", src.Spec.VolumeName, err)
		}
		if !claimedBy(pv, src) {
			return nil, userError{fmt.Sprintf("Data source PVC %q is not the claim of PersistentVolume %q (its claimRef points elsewhere): clone only a claim bound to its own volume", ds.Name, pv.Name)}
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.driver() {
			return nil, userError{fmt.Sprintf("Data source PVC %q is not a %s volume: clones need a source of the same driver", ds.Name, r.driver())}
		}
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: pv.Spec.CSI.VolumeHandle}}}, nil
	}
	return nil, userError{fmt.Sprintf("Data source %s %q is not supported: use a VolumeSnapshot or a PVC", ds.Kind, ds.Name)}
}

// claimedBy says whether pv is bound to exactly this claim: a PVC's spec.volumeName is written by its owner
// and can name any PV, the PV's claimRef (set by the PV controller) cannot be pointed at a foreign claim.
func claimedBy(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.UID == pvc.UID && ref.Namespace == pvc.Namespace && ref.Name == pvc.Name
}

// checkSnapshotContent refuses a restore from a content that is not bound to this very snapshot: a
// VolumeSnapshot's status can name any cluster-scoped content, the content's volumeSnapshotRef says whose it is.
func (r *claimReconciler) checkSnapshotContent(vs *snapshotv1.VolumeSnapshot, content *snapshotv1.VolumeSnapshotContent) error {
	ref := content.Spec.VolumeSnapshotRef
	if ref.UID != vs.UID || ref.Namespace != vs.Namespace || ref.Name != vs.Name {
		return userError{fmt.Sprintf("Data source VolumeSnapshot %q is not the snapshot of VolumeSnapshotContent %q (it belongs to %s/%s): restore only from a snapshot bound to its own content",
			vs.Name, content.Name, ref.Namespace, ref.Name)}
	}
	if content.Spec.Driver != r.driver() {
		return userError{fmt.Sprintf("Data source VolumeSnapshot %q is a %s snapshot: restores need a snapshot of %s", vs.Name, content.Spec.Driver, r.driver())}
	}
	if content.Status == nil || content.Status.SnapshotHandle == nil || content.Status.ReadyToUse == nil || !*content.Status.ReadyToUse {
		return userError{fmt.Sprintf("Data source VolumeSnapshot %q is not ready to use yet (its content %q has no ready snapshot)", vs.Name, content.Name)}
	}
	return nil
}

// persistentVolume is the PV for a provisioned volume.
func (r *claimReconciler) persistentVolume(pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, name string, req *csi.CreateVolumeRequest, v *csi.Volume) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	mode := corev1.PersistentVolumeFilesystem
	if pvc.Spec.VolumeMode != nil {
		mode = *pvc.Spec.VolumeMode
	}
	source := &corev1.CSIPersistentVolumeSource{Driver: r.driver(), VolumeHandle: v.GetVolumeId(), VolumeAttributes: v.GetVolumeContext()}
	if mode == corev1.PersistentVolumeFilesystem {
		source.FSType = req.GetVolumeCapabilities()[0].GetMount().GetFsType()
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisionedByAnnotation: r.driver()}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(v.GetCapacityBytes(), resource.BinarySI)},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              sc.Name,
			MountOptions:                  sc.MountOptions,
			VolumeMode:                    &mode,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace,
				Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: source},
		},
	}
	if node := nodeOf(v); node != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: r.opts.Names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}
	}
	return pv
}
