package provisioner

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// GroupCSI is the part of the CSI GroupController service the group snapshotter calls.
type GroupCSI interface {
	CreateVolumeGroupSnapshot(context.Context, *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error)
	DeleteVolumeGroupSnapshot(context.Context, *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error)
}

// groupContentFinalizer protects a VolumeGroupSnapshotContent until its group snapshot is deleted (the
// snapshot controller's finalizer, which the CSI snapshotter removes after DeleteVolumeGroupSnapshot).
const groupContentFinalizer = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection"

// groupSnapshotReconciler takes and deletes group snapshots for the driver's VolumeGroupSnapshotContents,
// as the csi-snapshotter sidecar does: it calls CreateVolumeGroupSnapshot and records the group's and its
// members' handles in the content's status (volumeSnapshotInfoList), from which the snapshot controller
// makes one VolumeSnapshotContent and VolumeSnapshot per member.
type groupSnapshotReconciler struct{ *Provisioner }

func (r *groupSnapshotReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(r.named("groupsnapshot")).For(&groupv1.VolumeGroupSnapshotContent{}).
		WithOptions(r.controllerOptions()).Complete(r)
}

// +kubebuilder:rbac:groups=groupsnapshot.storage.k8s.io,resources=volumegroupsnapshotcontents;volumegroupsnapshotcontents/status,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=groupsnapshot.storage.k8s.io,resources=volumegroupsnapshots,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *groupSnapshotReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	content := &groupv1.VolumeGroupSnapshotContent{}
	if err := r.client.Get(ctx, req.NamespacedName, content); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if content.Spec.Driver != r.driver() {
		return ctrl.Result{}, nil
	}
	if !content.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, content)
	}
	if err := r.setFinalizer(ctx, content, "VolumeGroupSnapshotContent", groupContentFinalizer, true); err != nil {
		return ctrl.Result{}, err
	}
	if content.Status != nil && content.Status.VolumeGroupSnapshotHandle != nil {
		return ctrl.Result{}, nil
	}
	base := content.DeepCopy()
	ready := true
	if h := content.Spec.Source.GroupSnapshotHandles; h != nil {
		// A pre-provisioned group: its handles are the group's name and its members' volume IDs.
		handle := h.VolumeGroupSnapshotHandle
		content.Status = &groupv1.VolumeGroupSnapshotContentStatus{VolumeGroupSnapshotHandle: &handle, ReadyToUse: &ready}
		for _, s := range h.VolumeSnapshotHandles {
			content.Status.VolumeSnapshotInfoList = append(content.Status.VolumeSnapshotInfoList, groupv1.VolumeSnapshotInfo{SnapshotHandle: s, ReadyToUse: &ready})
		}
		return ctrl.Result{}, r.patchStatus(ctx, content, base)
	}
	vgs, err := r.checkOwnership(ctx, content)
	if err != nil {
		return ctrl.Result{}, r.refuse(ctx, content, base, vgs, "GroupSnapshotRefused", err.Error())
	}
	name := "groupsnapshot-" + string(content.Spec.VolumeGroupSnapshotRef.UID)
	resp, err := withDeadline(ctx, r.opts.CallTimeout, r.opts.GroupCSI.CreateVolumeGroupSnapshot,
		&csi.CreateVolumeGroupSnapshotRequest{Name: name, SourceVolumeIds: content.Spec.Source.VolumeHandles, Parameters: map[string]string{
			topolvmv1.ParameterVolumeGroupSnapshotName:      content.Spec.VolumeGroupSnapshotRef.Name,
			topolvmv1.ParameterVolumeGroupSnapshotNamespace: content.Spec.VolumeGroupSnapshotRef.Namespace,
		}})
	if err != nil {
		msg := status.Convert(err).Message()
		switch status.Code(err) {
		case codes.FailedPrecondition, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists:
			// Final: the same volumes are refused again until the user changes the group.
			return ctrl.Result{}, r.refuse(ctx, content, base, vgs, "GroupSnapshotRefused", msg)
		}
		if rerr := r.refuse(ctx, content, base, vgs, "GroupSnapshotFailed", msg); rerr != nil {
			return ctrl.Result{}, rerr
		}
		return ctrl.Result{}, fmt.Errorf("take group snapshot %s: %w", name, err)
	}
	g := resp.GetGroupSnapshot()
	handle, created := g.GetGroupSnapshotId(), metav1.NewTime(g.GetCreationTime().AsTime())
	content.Status = &groupv1.VolumeGroupSnapshotContentStatus{VolumeGroupSnapshotHandle: &handle, CreationTime: &created, ReadyToUse: &ready}
	for _, s := range g.GetSnapshots() {
		t, size, ok := s.GetCreationTime().AsTime().UnixNano(), s.GetSizeBytes(), s.GetReadyToUse()
		content.Status.VolumeSnapshotInfoList = append(content.Status.VolumeSnapshotInfoList, groupv1.VolumeSnapshotInfo{
			VolumeHandle: s.GetSourceVolumeId(), SnapshotHandle: s.GetSnapshotId(), CreationTime: &t, RestoreSize: &size, ReadyToUse: &ok})
	}
	slices.SortFunc(content.Status.VolumeSnapshotInfoList, func(a, b groupv1.VolumeSnapshotInfo) int {
		return slices.Index(content.Spec.Source.VolumeHandles, a.VolumeHandle) - slices.Index(content.Spec.Source.VolumeHandles, b.VolumeHandle)
	})
	return ctrl.Result{}, r.patchStatus(ctx, content, base)
}

func (r *groupSnapshotReconciler) patchStatus(ctx context.Context, content, base *groupv1.VolumeGroupSnapshotContent) error {
	if err := r.client.Status().Patch(ctx, content, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("update status of VolumeGroupSnapshotContent %s: %w", content.Name, err)
	}
	return nil
}

// refuse records why the group was not taken in the content's status and as a Warning event on the
// VolumeGroupSnapshot (the object its user sees) or, when that is not known, on the content.
func (r *groupSnapshotReconciler) refuse(ctx context.Context, content, base *groupv1.VolumeGroupSnapshotContent, vgs *groupv1.VolumeGroupSnapshot, reason, msg string) error {
	var on runtime.Object = content
	if vgs != nil {
		on = vgs
	}
	r.events.Eventf(on, nil, corev1.EventTypeWarning, reason, "CreateVolumeGroupSnapshot", "%s", msg)
	if content.Status != nil && content.Status.Error != nil && content.Status.Error.Message != nil && *content.Status.Error.Message == msg {
		return nil
	}
	now := metav1.Now()
	content.Status = &groupv1.VolumeGroupSnapshotContentStatus{Error: &snapshotv1.VolumeSnapshotError{Message: &msg, Time: &now}}
	return r.patchStatus(ctx, content, base)
}

// checkOwnership refuses a content whose volumes are not all claimed in its VolumeGroupSnapshot's
// namespace, or whose VolumeGroupSnapshot is not the one it names (name and UID): a content, which anyone
// allowed to create one can fill in, never makes the driver snapshot another namespace's volumes. It
// returns the VolumeGroupSnapshot when it exists.
func (r *groupSnapshotReconciler) checkOwnership(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent) (*groupv1.VolumeGroupSnapshot, error) {
	ref := content.Spec.VolumeGroupSnapshotRef
	if ref.Namespace == "" || ref.Name == "" || ref.UID == "" {
		return nil, fmt.Errorf("VolumeGroupSnapshotContent %s names no VolumeGroupSnapshot (namespace, name and uid): it is not bound to a group snapshot", content.Name)
	}
	vgs := &groupv1.VolumeGroupSnapshot{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, vgs); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("VolumeGroupSnapshot %s/%s of VolumeGroupSnapshotContent %s does not exist", ref.Namespace, ref.Name, content.Name)
		}
		return nil, fmt.Errorf("get VolumeGroupSnapshot %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if vgs.UID != ref.UID {
		return nil, fmt.Errorf("VolumeGroupSnapshot %s/%s is not the one VolumeGroupSnapshotContent %s was made for (uid %s, not %s)", ref.Namespace, ref.Name, content.Name, vgs.UID, ref.UID)
	}
	handles := content.Spec.Source.VolumeHandles
	if len(handles) == 0 {
		return vgs, fmt.Errorf("VolumeGroupSnapshot %s/%s selects no volume of driver %s", ref.Namespace, ref.Name, r.driver())
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := r.client.List(ctx, pvs); err != nil {
		return vgs, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	var foreign []string
	for _, h := range handles {
		i := slices.IndexFunc(pvs.Items, func(pv corev1.PersistentVolume) bool {
			return pv.Spec.CSI != nil && pv.Spec.CSI.Driver == r.driver() && pv.Spec.CSI.VolumeHandle == h
		})
		switch {
		case i < 0:
			foreign = append(foreign, fmt.Sprintf("%s (no %s PersistentVolume)", h, r.driver()))
		case pvs.Items[i].Spec.ClaimRef == nil || pvs.Items[i].Spec.ClaimRef.Namespace != ref.Namespace:
			foreign = append(foreign, fmt.Sprintf("%s (PersistentVolume %s is not claimed in namespace %s)", h, pvs.Items[i].Name, ref.Namespace))
		}
	}
	if len(foreign) > 0 {
		return vgs, fmt.Errorf("VolumeGroupSnapshot %s/%s may snapshot only volumes claimed in its own namespace; refused: %v", ref.Namespace, ref.Name, foreign)
	}
	return vgs, nil
}

// delete deletes the group snapshot (deletion policy Delete) and releases the content.
func (r *groupSnapshotReconciler) delete(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent) error {
	if !controllerutil.ContainsFinalizer(content, groupContentFinalizer) {
		return nil
	}
	if content.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete && content.Status != nil && content.Status.VolumeGroupSnapshotHandle != nil {
		var ids []string
		for _, s := range content.Status.VolumeSnapshotInfoList {
			ids = append(ids, s.SnapshotHandle)
		}
		if _, err := withDeadline(ctx, r.opts.CallTimeout, r.opts.GroupCSI.DeleteVolumeGroupSnapshot,
			&csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: *content.Status.VolumeGroupSnapshotHandle, SnapshotIds: ids}); err != nil {
			return fmt.Errorf("delete group snapshot %s: %w", *content.Status.VolumeGroupSnapshotHandle, err)
		}
	}
	return r.setFinalizer(ctx, content, "VolumeGroupSnapshotContent", groupContentFinalizer, false)
}
