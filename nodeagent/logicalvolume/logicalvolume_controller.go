package logicalvolume

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
)

// Reconciler reconciles the LogicalVolumes of one node.
type Reconciler struct {
	client   client.Client
	lvmd     lvmdapi.Client
	nodeName string
	names    driver.Names
}

// New returns a reconciler for nodeName's LogicalVolumes that manages LVs through lvmd.
func New(c client.Client, lvmd lvmdapi.Client, nodeName string, names driver.Names) *Reconciler {
	return &Reconciler{client: c, lvmd: lvmd, nodeName: nodeName, names: names}
}

// SetupWithManager registers the reconciler; it sees only this node's LogicalVolumes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool {
		lv, ok := o.(*topolvmv1.LogicalVolume)
		return ok && lv.Spec.NodeName == r.nodeName
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("logicalvolume-"+r.nodeName).
		For(&topolvmv1.LogicalVolume{}, builder.WithPredicates(mine)).
		Complete(r)
}

// +kubebuilder:rbac:groups=topolvm.io;topolvm.cybozu.com,resources=logicalvolumes;logicalvolumes/status,verbs=get;list;watch;update;patch

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lv := &topolvmv1.LogicalVolume{}
	if err := r.client.Get(ctx, req.NamespacedName, lv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if lv.Spec.NodeName != r.nodeName {
		return ctrl.Result{}, nil
	}
	if _, ok := lv.Annotations[r.names.PendingDeletion()]; ok {
		return ctrl.Result{}, nil
	}
	if !lv.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, lv)
	}
	if err := r.ensureMetadata(ctx, lv); err != nil {
		return ctrl.Result{}, err
	}
	if lv.Status.VolumeID == "" {
		return ctrl.Result{}, r.create(ctx, lv)
	}
	return ctrl.Result{}, r.expand(ctx, lv)
}

// ensureMetadata adds the finalizer and the created-by label in one patch.
func (r *Reconciler) ensureMetadata(ctx context.Context, lv *topolvmv1.LogicalVolume) error {
	if controllerutil.ContainsFinalizer(lv, r.names.LogicalVolumeFinalizer()) && lv.Labels[driver.CreatedByLabel] == driver.CreatedByValue {
		return nil
	}
	base := lv.DeepCopy()
	controllerutil.AddFinalizer(lv, r.names.LogicalVolumeFinalizer())
	if lv.Labels == nil {
		lv.Labels = map[string]string{}
	}
	lv.Labels[driver.CreatedByLabel] = driver.CreatedByValue
	if err := r.client.Patch(ctx, lv, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer to LogicalVolume %s: %w", lv.Name, err)
	}
	return nil
}

// create makes the LV, or adopts the one a previous attempt made, and records the result in status.
func (r *Reconciler) create(ctx context.Context, lv *topolvmv1.LogicalVolume) error {
	if lv.Status.Code != int32(codes.OK) {
		// The code is this node's answer to the controller, which deletes the object; creating now would
		// hand the controller a volume it has already given up on.
		return nil
	}
	if lv.Labels[topolvmv1.GroupSnapshotMemberLabel] != "" {
		// A member of a group snapshot: the group's reconciler creates its LV with the other members at
		// one instant, and sets its status; a snapshot taken here alone would not be consistent with them.
		return nil
	}
	name := string(lv.UID)
	list, err := r.lvmd.GetLVList(ctx, &proto.GetLVListRequest{DeviceClass: lv.Spec.DeviceClass})
	if err != nil {
		return r.fail(ctx, lv, err)
	}
	for _, v := range list.GetVolumes() {
		if v.GetName() == name {
			ctrl.LoggerFrom(ctx).Info("Adopted existing LV", "logicalVolume", lv.Name, "lv", name)
			return r.succeed(ctx, lv, v.GetSizeBytes())
		}
	}
	var size int64
	if lv.Spec.Source != "" {
		size, err = r.createSnapshot(ctx, lv)
	} else {
		var resp *proto.CreateLVResponse
		resp, err = r.lvmd.CreateLV(ctx, &proto.CreateLVRequest{Name: name, DeviceClass: lv.Spec.DeviceClass,
			LvcreateOptionClass: lv.Spec.LvcreateOptionClass, SizeBytes: lv.Spec.Size.Value(), Tags: []string{ObjectTag(lv.Name)}})
		size = resp.GetVolume().GetSizeBytes()
	}
	if err != nil {
		return r.fail(ctx, lv, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created LV", "logicalVolume", lv.Name, "lv", name, "size", size)
	return r.succeed(ctx, lv, size)
}

func (r *Reconciler) createSnapshot(ctx context.Context, lv *topolvmv1.LogicalVolume) (int64, error) {
	if lv.Spec.AccessType != "ro" && lv.Spec.AccessType != "rw" {
		return 0, status.Errorf(codes.InvalidArgument, "accessType %q of a LogicalVolume with a source must be ro or rw", lv.Spec.AccessType)
	}
	src := &topolvmv1.LogicalVolume{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: lv.Spec.Source}, src); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, status.Errorf(codes.NotFound, "source LogicalVolume %s not found", lv.Spec.Source)
		}
		return 0, fmt.Errorf("get source LogicalVolume %s: %w", lv.Spec.Source, err)
	}
	if src.Status.VolumeID == "" {
		return 0, status.Errorf(codes.Unavailable, "source LogicalVolume %s has no volume yet", src.Name)
	}
	resp, err := r.lvmd.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: string(lv.UID), DeviceClass: lv.Spec.DeviceClass,
		SourceVolume: src.Status.VolumeID, SizeBytes: lv.Spec.Size.Value(), AccessType: lv.Spec.AccessType,
		Tags: []string{ObjectTag(lv.Name)}})
	return resp.GetSnapshot().GetSizeBytes(), err
}

func (r *Reconciler) succeed(ctx context.Context, lv *topolvmv1.LogicalVolume, size int64) error {
	lv.Status.VolumeID = string(lv.UID)
	lv.Status.CurrentSize = resource.NewQuantity(size, resource.BinarySI)
	lv.Status.Code, lv.Status.Message = int32(codes.OK), ""
	return r.updateStatus(ctx, lv)
}

// fail records a gRPC status in the LogicalVolume (errors that carry none are Internal). A transient
// failure to reach lvmd is returned for a retry instead.
func (r *Reconciler) fail(ctx context.Context, lv *topolvmv1.LogicalVolume, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(codes.Internal, err.Error())
	}
	if st.Code() == codes.Unavailable || st.Code() == codes.Canceled || st.Code() == codes.DeadlineExceeded {
		return fmt.Errorf("create LV for LogicalVolume %s: %w", lv.Name, err)
	}
	lv.Status.Code, lv.Status.Message = int32(st.Code()), st.Message()
	return r.updateStatus(ctx, lv)
}

func (r *Reconciler) updateStatus(ctx context.Context, lv *topolvmv1.LogicalVolume) error {
	if err := r.client.Status().Update(ctx, lv); err != nil {
		return fmt.Errorf("update status of LogicalVolume %s: %w", lv.Name, err)
	}
	return nil
}

// expand grows the LV to spec.size (the LV ownedLV allows).
func (r *Reconciler) expand(ctx context.Context, lv *topolvmv1.LogicalVolume) error {
	if lv.Status.CurrentSize != nil && lv.Spec.Size.Cmp(*lv.Status.CurrentSize) <= 0 {
		return nil
	}
	name, err := r.ownedLV(ctx, lv)
	var resp *proto.ResizeLVResponse
	if err == nil {
		resp, err = r.lvmd.ResizeLV(ctx, &proto.ResizeLVRequest{Name: name, DeviceClass: lv.Spec.DeviceClass, SizeBytes: lv.Spec.Size.Value()})
	}
	if err != nil {
		st, _ := status.FromError(err)
		lv.Status.Code, lv.Status.Message = int32(st.Code()), st.Message()
		if uerr := r.updateStatus(ctx, lv); uerr != nil {
			return uerr
		}
		return fmt.Errorf("resize LV %s of LogicalVolume %s: %w", name, lv.Name, err)
	}
	lv.Status.CurrentSize = resource.NewQuantity(resp.GetSizeBytes(), resource.BinarySI)
	lv.Status.Code, lv.Status.Message = int32(codes.OK), ""
	return r.updateStatus(ctx, lv)
}

// ObjectTagPrefix + the LogicalVolume's name is the LVM tag on the LV created for it. It lets the agent
// tell whose LV a status.volumeID that is not the object's uid names (a LogicalVolume restored from a
// backup keeps volumeID but gets a new uid).
const ObjectTagPrefix = "lvms-logicalvolume="

// ObjectTag is the LVM tag binding an LV to the LogicalVolume named name.
func ObjectTag(name string) string { return ObjectTagPrefix + name }

// reconcileDelete removes the LV and then the finalizer. An LV the agent must not remove (it belongs to
// another LogicalVolume, or lvmd refuses it) keeps the finalizer, and status says why.
func (r *Reconciler) reconcileDelete(ctx context.Context, lv *topolvmv1.LogicalVolume) error {
	if !controllerutil.ContainsFinalizer(lv, r.names.LogicalVolumeFinalizer()) {
		return nil
	}
	name, err := r.ownedLV(ctx, lv)
	if err == nil {
		_, err = r.lvmd.RemoveLV(ctx, &proto.RemoveLVRequest{Name: name, DeviceClass: lv.Spec.DeviceClass})
	}
	switch status.Code(err) {
	case codes.OK, codes.NotFound:
	case codes.PermissionDenied, codes.FailedPrecondition:
		ctrl.LoggerFrom(ctx).Info("Refused to remove LV", "logicalVolume", lv.Name, "lv", name, "reason", err)
		return r.refuse(ctx, lv, err)
	default:
		return fmt.Errorf("remove LV %s of LogicalVolume %s: %w", name, lv.Name, err)
	}
	base := lv.DeepCopy()
	controllerutil.RemoveFinalizer(lv, r.names.LogicalVolumeFinalizer())
	if err := r.client.Patch(ctx, lv, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("remove finalizer from LogicalVolume %s: %w", lv.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Removed LV", "logicalVolume", lv.Name, "lv", name)
	return nil
}

// ownedLV returns the name of lv's LV. status.volumeID is not trusted on its own: it is used when it is
// the object's uid (the name LVMS and TopoLVM give the LV), or when the LV it names carries this object's
// tag. Any other volumeID is refused with PermissionDenied, so that a wrong or forged status never makes
// the agent remove another volume. An empty volumeID means the uid (a crash may have left an LV whose
// name never reached status), and so does a volumeID whose LV is gone.
func (r *Reconciler) ownedLV(ctx context.Context, lv *topolvmv1.LogicalVolume) (string, error) {
	uid, name := string(lv.UID), lv.Status.VolumeID
	if name == "" || name == uid {
		return uid, nil
	}
	list, err := r.lvmd.GetLVList(ctx, &proto.GetLVListRequest{DeviceClass: lv.Spec.DeviceClass})
	if err != nil {
		return name, err
	}
	for _, v := range list.GetVolumes() {
		if v.GetName() != name {
			continue
		}
		if slices.Contains(v.GetTags(), ObjectTag(lv.Name)) {
			return name, nil
		}
		return name, status.Errorf(codes.PermissionDenied,
			"status.volumeID %q is not this LogicalVolume's uid %s and LV %s does not carry the tag %q, so it may be another volume's LV; the agent neither grows nor removes it. Correct status.volumeID, or (when deleting) remove the LV by hand if it is this volume's, then the finalizer %s",
			name, uid, name, ObjectTag(lv.Name), r.names.LogicalVolumeFinalizer())
	}
	return uid, nil // the LV volumeID names is gone; only the uid's LV can be left
}

// refuse records a refused removal in status; the finalizer stays until someone resolves it.
func (r *Reconciler) refuse(ctx context.Context, lv *topolvmv1.LogicalVolume, err error) error {
	st, _ := status.FromError(err)
	if lv.Status.Code == int32(st.Code()) && lv.Status.Message == st.Message() {
		return nil
	}
	lv.Status.Code, lv.Status.Message = int32(st.Code()), st.Message()
	return r.updateStatus(ctx, lv)
}
