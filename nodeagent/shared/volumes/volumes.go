// Package volumes is the node side of the shared driver's volumes (shared.lvm.topolvm.io): for every
// LogicalVolume of a shared volume group whose worker annotation names this node, it creates the linear LV
// inactive, grows it when spec.size grows (offline: lvmlockd refuses while a node has it active), and
// removes it when the object is deleted, once no node has it active. The operator holds no lock, so it
// hands this work to a node in the lockspace. Status is TopoLVM's (volumeID = LV name = the object's uid,
// currentSize, code and message), which the controller service waits on.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockspace"
)

// retry is how soon a volume that waits for this node's lockspace or for another node to release it is
// looked at again.
const retry = 15 * time.Second

// IsShared reports whether lv is a volume of the shared driver: no node of its own, a shared volume group.
func IsShared(lv *topolvmv1.LogicalVolume) bool {
	return lv.Spec.NodeName == "" && lv.Annotations[driver.SharedVolumeGroupAnnotation] != ""
}

// Reconciler does the work of the shared volumes assigned to one node.
type Reconciler struct {
	Client client.Client
	Node   string
	Names  driver.Names
	// Lockspace returns this node's lvm2 commands for a shared volume group it has joined.
	Lockspace func(vg string) (lockspace.LVM, error)
	Events    events.EventRecorder
}

// SetupWithManager registers the reconciler for the shared volumes whose worker is this node.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool {
		lv, ok := o.(*topolvmv1.LogicalVolume)
		return ok && IsShared(lv) && lv.Annotations[driver.SharedWorkerAnnotation] == r.Node
	})
	return ctrl.NewControllerManagedBy(mgr).Named("shared-volumes").
		For(&topolvmv1.LogicalVolume{}, builder.WithPredicates(mine)).Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lv := &topolvmv1.LogicalVolume{}
	if err := r.Client.Get(ctx, req.NamespacedName, lv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !IsShared(lv) || lv.Annotations[driver.SharedWorkerAnnotation] != r.Node {
		return ctrl.Result{}, nil
	}
	if lv.Status.VolumeID != "" && lv.Status.VolumeID != string(lv.UID) {
		// A shared LV is always named after its object's uid; anything else in status is not trusted.
		return ctrl.Result{}, r.setStatus(ctx, lv, codes.PermissionDenied, fmt.Sprintf(
			"status.volumeID %q is not this LogicalVolume's uid %s: the agent neither grows nor removes it; correct status.volumeID", lv.Status.VolumeID, lv.UID))
	}
	vg := lv.Annotations[driver.SharedVolumeGroupAnnotation]
	l, err := r.Lockspace(vg)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Shared volume waits for the lockspace", "logicalVolume", lv.Name, "reason", err.Error())
		return ctrl.Result{RequeueAfter: retry}, nil
	}
	switch {
	case !lv.DeletionTimestamp.IsZero():
		return r.remove(ctx, l, vg, lv)
	case lv.Status.VolumeID == "":
		return ctrl.Result{}, r.create(ctx, l, vg, lv)
	}
	return r.grow(ctx, l, vg, lv)
}

// create makes the LV inactive, or adopts the one an earlier attempt made.
func (r *Reconciler) create(ctx context.Context, l lockspace.LVM, vg string, lv *topolvmv1.LogicalVolume) error {
	if lv.Status.Code != int32(codes.OK) {
		return nil // the controller has this answer and deletes the object
	}
	name := string(lv.UID)
	found, err := l.Lookup(ctx, vg, name)
	switch {
	case err == nil:
		ctrl.LoggerFrom(ctx).Info("Adopted existing shared LV", "logicalVolume", lv.Name, "lv", vg+"/"+name)
		return r.succeed(ctx, lv, found.Size)
	case !errors.Is(err, lockspace.ErrNoLV):
		return err
	}
	if err := l.CreateLV(ctx, vg, name, uint64(lv.Spec.Size.Value()), lvm.OwnerTag); err != nil {
		var ce *lvm.CommandError
		if errors.As(err, &ce) && strings.Contains(ce.Stderr, "insufficient free space") {
			return r.setStatus(ctx, lv, codes.ResourceExhausted, fmt.Sprintf("shared volume group %s has not enough free space: %s", vg, strings.TrimSpace(ce.Stderr)))
		}
		return err
	}
	created, err := l.Lookup(ctx, vg, name)
	if err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Created shared LV", "logicalVolume", lv.Name, "lv", vg+"/"+name, "size", created.Size)
	return r.succeed(ctx, lv, created.Size)
}

// grow extends the LV to spec.size; a node that has it active keeps it from growing until it lets go.
func (r *Reconciler) grow(ctx context.Context, l lockspace.LVM, vg string, lv *topolvmv1.LogicalVolume) (ctrl.Result, error) {
	if lv.Status.CurrentSize != nil && lv.Spec.Size.Cmp(*lv.Status.CurrentSize) <= 0 {
		return ctrl.Result{}, nil
	}
	err := l.ExtendLV(ctx, vg, lv.Status.VolumeID, uint64(lv.Spec.Size.Value()))
	var locked *lockspace.LockedError
	if errors.As(err, &locked) {
		r.warn(lv, "VolumeInUse", "Expand", "Cannot grow shared volume %s while a node has it active (shared volumes grow offline): %v", lv.Name, err)
		return ctrl.Result{RequeueAfter: retry}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	grown, err := l.Lookup(ctx, vg, lv.Status.VolumeID)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.succeed(ctx, lv, grown.Size)
}

// remove removes the LV, then the finalizer. lvmlockd refuses while any node has it active: the object
// then stays, an event says so, and the removal is retried.
func (r *Reconciler) remove(ctx context.Context, l lockspace.LVM, vg string, lv *topolvmv1.LogicalVolume) (ctrl.Result, error) {
	fin := r.Names.LogicalVolumeFinalizer()
	if !controllerutil.ContainsFinalizer(lv, fin) {
		return ctrl.Result{}, nil
	}
	name := string(lv.UID)
	if _, err := l.Lookup(ctx, vg, name); err == nil {
		err := l.RemoveLV(ctx, vg, name)
		var locked *lockspace.LockedError
		if errors.As(err, &locked) {
			r.warn(lv, "VolumeInUse", "Delete", "Shared volume %s is not removed while a node has it active: %v", lv.Name, err)
			return ctrl.Result{RequeueAfter: retry}, nil
		} else if err != nil {
			return ctrl.Result{}, err
		}
		ctrl.LoggerFrom(ctx).Info("Removed shared LV", "logicalVolume", lv.Name, "lv", vg+"/"+name)
	} else if !errors.Is(err, lockspace.ErrNoLV) {
		return ctrl.Result{}, err
	}
	base := lv.DeepCopy()
	controllerutil.RemoveFinalizer(lv, fin)
	if err := r.Client.Patch(ctx, lv, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer from LogicalVolume %s: %w", lv.Name, err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) succeed(ctx context.Context, lv *topolvmv1.LogicalVolume, size uint64) error {
	lv.Status.VolumeID = string(lv.UID)
	lv.Status.CurrentSize = resource.NewQuantity(int64(size), resource.BinarySI)
	lv.Status.Code, lv.Status.Message = int32(codes.OK), ""
	if err := r.Client.Status().Update(ctx, lv); err != nil {
		return fmt.Errorf("update status of LogicalVolume %s: %w", lv.Name, err)
	}
	return nil
}

func (r *Reconciler) setStatus(ctx context.Context, lv *topolvmv1.LogicalVolume, code codes.Code, msg string) error {
	if lv.Status.Code == int32(code) && lv.Status.Message == msg {
		return nil
	}
	lv.Status.Code, lv.Status.Message = int32(code), msg
	if err := r.Client.Status().Update(ctx, lv); err != nil {
		return fmt.Errorf("update status of LogicalVolume %s: %w", lv.Name, err)
	}
	return nil
}

func (r *Reconciler) warn(lv *topolvmv1.LogicalVolume, reason, action, format string, args ...any) {
	if r.Events != nil {
		r.Events.Eventf(lv, nil, corev1.EventTypeWarning, reason, action, format, args...)
	}
}
