package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func ctrlMergeFrom(obj client.Object) client.Patch { return client.MergeFrom(obj) }

// volumeReconciler deletes released PVs of the driver whose reclaim policy is Delete, and their volumes.
type volumeReconciler struct{ *Provisioner }

func (r *volumeReconciler) setup(mgr ctrl.Manager) error {
	// A PV is released when its claim goes: look at the PV again then.
	claimGone := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		pvc, ok := o.(*corev1.PersistentVolumeClaim)
		if !ok {
			return nil
		}
		return volumesOf(pvc)
	})
	return ctrl.NewControllerManagedBy(mgr).Named(r.named("volume")).For(&corev1.PersistentVolume{}).
		Watches(&corev1.PersistentVolumeClaim{}, claimGone).WithOptions(r.controllerOptions()).Complete(r)
}

// volumesOf names the PVs a claim's change concerns: the one provisioned for it (pvc-<UID>) and, when it
// is bound to another (a PV made by hand, or taken over), that one too.
func volumesOf(pvc *corev1.PersistentVolumeClaim) []reconcile.Request {
	out := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "pvc-" + string(pvc.UID)}}}
	if pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName != out[0].Name {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: pvc.Spec.VolumeName}})
	}
	return out
}

// Reconcile implements reconcile.Reconciler.
func (r *volumeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pv := &corev1.PersistentVolume{}
	if err := r.client.Get(ctx, req.NamespacedName, pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.driver() ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || !pv.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	released, err := r.released(ctx, pv)
	if err != nil || !released {
		return ctrl.Result{}, err
	}
	if _, err := r.opts.CSI.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle}); err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			// In use (a shared volume active on a node): looked at again at a steady pace, not with a backoff
			// that grows while the user stops what uses it.
			r.events.Eventf(pv, nil, corev1.EventTypeWarning, "VolumeFailedDelete", "Delete", "Volume %s is not deleted yet: %s",
				pv.Spec.CSI.VolumeHandle, status.Convert(err).Message())
			return ctrl.Result{RequeueAfter: r.opts.InUseRetry}, nil
		}
		r.events.Eventf(pv, nil, corev1.EventTypeWarning, "VolumeFailedDelete", "Delete",
			"Deleting volume %s failed and is retried with backoff (is the LVMS node agent on the volume's node running?): %s",
			pv.Spec.CSI.VolumeHandle, status.Convert(err).Message())
		return ctrl.Result{}, fmt.Errorf("delete volume %s of PV %s: %w", pv.Spec.CSI.VolumeHandle, pv.Name, err)
	}
	if err := r.client.Delete(ctx, pv); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("delete PV %s: %w", pv.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted released volume", "pv", pv.Name, "volumeID", pv.Spec.CSI.VolumeHandle)
	return ctrl.Result{}, nil
}

// released reports whether the PV's claim is gone: the PV controller says Released, or the claim it was
// made for no longer exists (read from the API server, never a possibly stale cache: this decides whether
// data is destroyed).
func (r *volumeReconciler) released(ctx context.Context, pv *corev1.PersistentVolume) (bool, error) {
	if pv.Status.Phase == corev1.VolumeReleased {
		return true, nil
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return false, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.reader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, pvc)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get claim %s/%s of PV %s: %w", ref.Namespace, ref.Name, pv.Name, err)
	}
	return pvc.UID != ref.UID, nil
}
