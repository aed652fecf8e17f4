package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// contentFinalizer protects a VolumeSnapshotContent until its snapshot is deleted (the snapshot
// controller's finalizer, which the CSI snapshotter removes after DeleteSnapshot).
const contentFinalizer = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"

// snapshotReconciler takes and deletes snapshots for the driver's VolumeSnapshotContents, as the
// csi-snapshotter sidecar does.
type snapshotReconciler struct{ *Provisioner }

func (r *snapshotReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(r.named("snapshot")).For(&snapshotv1.VolumeSnapshotContent{}).
		WithOptions(r.controllerOptions()).Complete(r)
}

// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshotcontents;volumesnapshotcontents/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshots,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *snapshotReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	content := &snapshotv1.VolumeSnapshotContent{}
	if err := r.client.Get(ctx, req.NamespacedName, content); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if content.Spec.Driver != r.driver() {
		return ctrl.Result{}, nil
	}
	if !content.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, content)
	}
	if err := r.setFinalizer(ctx, content, "VolumeSnapshotContent", contentFinalizer, true); err != nil {
		return ctrl.Result{}, err
	}
	if content.Status != nil && content.Status.SnapshotHandle != nil {
		return ctrl.Result{}, nil
	}
	base := content.DeepCopy()
	ready := true
	if h := content.Spec.Source.SnapshotHandle; h != nil {
		// A pre-provisioned snapshot: its handle is the LV's volume ID.
		content.Status = &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: h, ReadyToUse: &ready}
	} else if v := content.Spec.Source.VolumeHandle; v != nil {
		name := "snapshot-" + string(content.Spec.VolumeSnapshotRef.UID)
		if content.Spec.VolumeSnapshotRef.UID == "" {
			name = content.Name
		}
		resp, err := r.opts.CSI.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: *v})
		if err != nil {
			msg := status.Convert(err).Message()
			now := metav1.Now()
			content.Status = &snapshotv1.VolumeSnapshotContentStatus{Error: &snapshotv1.VolumeSnapshotError{Message: &msg, Time: &now}}
			if uerr := r.client.Status().Patch(ctx, content, client.MergeFrom(base)); uerr != nil {
				return ctrl.Result{}, fmt.Errorf("record snapshot failure on %s: %w (snapshot: %v)", content.Name, uerr, err)
			}
			return ctrl.Result{}, fmt.Errorf("take snapshot %s of volume %s: %w", name, *v, err)
		}
		s := resp.GetSnapshot()
		created, size := s.GetCreationTime().AsTime().UnixNano(), s.GetSizeBytes()
		content.Status = &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &s.SnapshotId, CreationTime: &created,
			RestoreSize: &size, ReadyToUse: &ready}
	}
	if err := r.client.Status().Patch(ctx, content, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, fmt.Errorf("update status of VolumeSnapshotContent %s: %w", content.Name, err)
	}
	return ctrl.Result{}, nil
}

// delete deletes the snapshot (deletion policy Delete) and releases the content.
func (r *snapshotReconciler) delete(ctx context.Context, content *snapshotv1.VolumeSnapshotContent) error {
	if !controllerutil.ContainsFinalizer(content, contentFinalizer) {
		return nil
	}
	if content.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete && content.Status != nil && content.Status.SnapshotHandle != nil {
		if _, err := r.opts.CSI.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: *content.Status.SnapshotHandle}); err != nil {
			return fmt.Errorf("delete snapshot %s: %w", *content.Status.SnapshotHandle, err)
		}
	}
	return r.setFinalizer(ctx, content, "VolumeSnapshotContent", contentFinalizer, false)
}

// setFinalizer adds (add) or removes the snapshot controller's finalizer of a (group) snapshot content, as
// the csi-snapshotter sidecar does: a plain merge patch, nothing sent when it is already so.
func (p *Provisioner) setFinalizer(ctx context.Context, content client.Object, kind, finalizer string, add bool) error {
	if controllerutil.ContainsFinalizer(content, finalizer) == add {
		return nil
	}
	base := content.DeepCopyObject().(client.Object)
	verb := "add finalizer to"
	if add {
		controllerutil.AddFinalizer(content, finalizer)
	} else {
		verb = "remove finalizer from"
		controllerutil.RemoveFinalizer(content, finalizer)
	}
	if err := p.client.Patch(ctx, content, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("%s %s %s: %w", verb, kind, content.GetName(), err)
	}
	return nil
}
