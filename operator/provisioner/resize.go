package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// resize grows a bound PVC's volume when the PVC asks for more than the PV has, as external-resizer does:
// the controller grows the LV, the PV's capacity follows, and the file system growth is handed to the node
// (kubelet calls NodeExpandVolume) through the FileSystemResizePending condition.
//
// Only the claim a volume is bound to may grow it: spec.volumeName is the claim owner's to write and can name
// any PV, so the PV's claimRef must point back at this claim (namespace, name, UID) and the claim must be Bound.
func (r *claimReconciler) resize(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (ctrl.Result, error) {
	pv := &corev1.PersistentVolume{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil // the PV controller reports a claim naming a missing volume
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("get PV %s: %w", pvc.Spec.VolumeName, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.driver() {
		return ctrl.Result{}, nil
	}
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	if !ok || want.Cmp(have) <= 0 {
		return ctrl.Result{}, nil
	}
	if !claimedBy(pv, pvc) || pvc.Status.Phase != corev1.ClaimBound {
		r.warn(pvc, "VolumeResizeRefused", "Resize", "Not growing PersistentVolume %q: it is not bound to this claim (its claimRef names another claim or the claim is not Bound)", pv.Name)
		return ctrl.Result{}, nil
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		r.warn(pvc, "ExpansionNotAllowed", "Resize", "StorageClass %q does not allow volume expansion: set allowVolumeExpansion: true on it to grow this claim", sc.Name)
		return ctrl.Result{}, nil
	}
	capability := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		capability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		capability.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: pv.Spec.CSI.FSType}}
	}
	resp, err := r.opts.CSI.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: pv.Spec.CSI.VolumeHandle, CapacityRange: &csi.CapacityRange{RequiredBytes: want.Value()}, VolumeCapability: capability})
	if err != nil {
		r.warn(pvc, "VolumeResizeFailed", "Resize", "Growing the volume to %s failed: %s", want.String(), status.Convert(err).Message())
		if status.Code(err) == codes.FailedPrecondition {
			return ctrl.Result{RequeueAfter: r.opts.InUseRetry}, nil // in use: at a steady pace until it is not
		}
		return ctrl.Result{}, fmt.Errorf("expand volume of PVC %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	size := *resource.NewQuantity(resp.GetCapacityBytes(), resource.BinarySI)
	base := pv.DeepCopy()
	pv.Spec.Capacity[corev1.ResourceStorage] = size
	if err := r.client.Patch(ctx, pv, ctrlMergeFrom(base)); err != nil {
		return ctrl.Result{}, fmt.Errorf("update capacity of PV %s: %w", pv.Name, err)
	}
	sbase := pvc.DeepCopy()
	if resp.GetNodeExpansionRequired() {
		setCondition(pvc, corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimFileSystemResizePending,
			Status: corev1.ConditionTrue, Message: "Waiting for the node to grow the file system (the volume must be used by a pod)."})
	} else {
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
		removeCondition(pvc, corev1.PersistentVolumeClaimResizing)
	}
	if err := r.client.Status().Patch(ctx, pvc, ctrlMergeFrom(sbase)); err != nil {
		return ctrl.Result{}, fmt.Errorf("update status of PVC %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	r.events.Eventf(pvc, nil, corev1.EventTypeNormal, "VolumeResizeSuccessful", "Resize", "Grew the volume to %s", size.String())
	return ctrl.Result{}, nil
}

func setCondition(pvc *corev1.PersistentVolumeClaim, c corev1.PersistentVolumeClaimCondition) {
	c.LastTransitionTime = metav1.Now()
	for i := range pvc.Status.Conditions {
		if pvc.Status.Conditions[i].Type == c.Type {
			if pvc.Status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = pvc.Status.Conditions[i].LastTransitionTime
			}
			pvc.Status.Conditions[i] = c
			return
		}
	}
	pvc.Status.Conditions = append(pvc.Status.Conditions, c)
}

func removeCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) {
	out := pvc.Status.Conditions[:0]
	for _, c := range pvc.Status.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	pvc.Status.Conditions = out
}
