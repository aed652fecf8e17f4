// Package reconciler runs a node's LogicalVolumeGroupSnapshots through the group snapshot engine
// (nodeagent/groupsnapshot): it checks the group against its LogicalVolumes, takes it, and records the
// result on the member snapshot LogicalVolumes (volume ID and size, as a single snapshot gets them) and then
// on the group (phase, suspend time).
//
// The engine takes LVMS's volume group lock itself, so the reconciler calls it directly, never from inside
// lvmd (whose calls hold the same lock). A refused or failed group leaves no member snapshot behind; the
// CSI controller then deletes the member LogicalVolumes and the group.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot"
)

// Engine takes group snapshots; *groupsnapshot.Engine is the real one.
type Engine interface {
	Take(ctx context.Context, req groupsnapshot.Request) (groupsnapshot.Result, error)
	Recover(ctx context.Context) error
}

// VolumeGroupFunc returns the volume group of a device class ("" is the default class) and whether the
// class is thin; an unknown class is an error.
type VolumeGroupFunc func(deviceClass string) (vg string, thin bool, err error)

// Options configure a Reconciler.
type Options struct {
	NodeName    string
	Engine      Engine
	VolumeGroup VolumeGroupFunc
	// Taken is called after each group that created snapshots (lvmd's capacity notification); may be nil.
	Taken func()
	// Reader reads a group from the API server before it is taken, so that a cache behind the group's
	// last status never makes the node take it twice; nil reads through the client.
	Reader client.Reader
}

// Reconciler reconciles the LogicalVolumeGroupSnapshots of one node.
type Reconciler struct {
	client client.Client
	o      Options

	mu        sync.Mutex
	recovered bool
}

// New returns a Reconciler.
func New(c client.Client, o Options) *Reconciler {
	return &Reconciler{client: c, o: o}
}

// Reasons the reconciler records besides the engine's refusal reasons.
const (
	ReasonInvalidMember   = "InvalidMember"
	ReasonUnknownClass    = "UnknownDeviceClass"
	ReasonSuspendDeadline = "SuspendDeadline"
	ReasonResumeFailed    = "ResumeFailed"
	ReasonFailed          = "Failed"
)

// SetupWithManager registers the reconciler for this node's groups, and recovers the groups a killed
// agent left when the manager starts.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(manager(func(ctx context.Context) error {
		if err := r.recover(ctx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Recovering interrupted group snapshots failed; retried before the next group")
		}
		return nil
	})); err != nil {
		return err
	}
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool {
		g, ok := o.(*topolvmv1.LogicalVolumeGroupSnapshot)
		return ok && g.Spec.NodeName == r.o.NodeName
	})
	return ctrl.NewControllerManagedBy(mgr).Named("groupsnapshot-"+r.o.NodeName).
		For(&topolvmv1.LogicalVolumeGroupSnapshot{}, builder.WithPredicates(mine)).Complete(r)
}

type manager func(context.Context) error

func (f manager) Start(ctx context.Context) error { return f(ctx) }

// recover runs the engine's Recover once successfully.
func (r *Reconciler) recover(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recovered {
		return nil
	}
	if err := r.o.Engine.Recover(ctx); err != nil {
		return fmt.Errorf("recover interrupted group snapshots: %w", err)
	}
	r.recovered = true
	return nil
}

// +kubebuilder:rbac:groups=topolvm.io,resources=logicalvolumegroupsnapshots,verbs=get;list;watch
// +kubebuilder:rbac:groups=topolvm.io,resources=logicalvolumegroupsnapshots/status,verbs=get;update;patch

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	g := &topolvmv1.LogicalVolumeGroupSnapshot{}
	if err := r.client.Get(ctx, req.NamespacedName, g); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if g.Spec.NodeName != r.o.NodeName || !g.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	switch g.Status.Phase {
	case topolvmv1.GroupSnapshotReady, topolvmv1.GroupSnapshotRefused:
		return ctrl.Result{}, nil
	case topolvmv1.GroupSnapshotFailed:
		if g.Status.Reason == ReasonResumeFailed {
			r.mu.Lock()
			r.recovered = false
			r.mu.Unlock()
			return ctrl.Result{}, r.recover(ctx)
		}
		return ctrl.Result{}, nil
	}
	if r.o.Reader != nil {
		if err := r.o.Reader.Get(ctx, req.NamespacedName, g); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if g.Status.Phase != "" && g.Status.Phase != topolvmv1.GroupSnapshotPending {
			return ctrl.Result{}, nil // the cache is behind: the group has its answer
		}
	}
	if err := r.recover(ctx); err != nil {
		return ctrl.Result{}, err
	}
	request, members, err := r.request(ctx, g)
	var refused *groupsnapshot.RefusedError
	switch {
	case errors.As(err, &refused):
		return ctrl.Result{}, r.setStatus(ctx, g, topolvmv1.GroupSnapshotRefused, string(refused.Reason), refused.Message, nil)
	case err != nil:
		return ctrl.Result{}, err
	}
	res, err := r.o.Engine.Take(ctx, request)
	if err != nil {
		return ctrl.Result{}, r.failed(ctx, g, err)
	}
	if r.o.Taken != nil {
		r.o.Taken()
	}
	for _, m := range members {
		if err := r.memberReady(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	var suspended *metav1.Duration
	if res.Suspended > 0 {
		suspended = &metav1.Duration{Duration: res.Suspended}
	}
	ctrl.LoggerFrom(ctx).Info("Took group snapshot", "group", g.Name, "members", len(members), "suspended", res.Suspended)
	return ctrl.Result{}, r.setStatus(ctx, g, topolvmv1.GroupSnapshotReady, "", "", suspended)
}

// failed records a group the engine did not take. A cancelled call is retried; an origin that may still
// be suspended is recorded and returned, so that Recover is retried.
func (r *Reconciler) failed(ctx context.Context, g *topolvmv1.LogicalVolumeGroupSnapshot, err error) error {
	var refused *groupsnapshot.RefusedError
	var deadline *groupsnapshot.DeadlineError
	switch {
	case errors.As(err, &refused):
		return r.setStatus(ctx, g, topolvmv1.GroupSnapshotRefused, string(refused.Reason), refused.Message, nil)
	case errors.As(err, &deadline):
		return r.setStatus(ctx, g, topolvmv1.GroupSnapshotFailed, ReasonSuspendDeadline, deadline.Error(), nil)
	case ctx.Err() != nil:
		return fmt.Errorf("take group snapshot %s: %w", g.Name, err)
	}
	if _, stuck := groupsnapshot.AsResumeError(err); stuck {
		if serr := r.setStatus(ctx, g, topolvmv1.GroupSnapshotFailed, ReasonResumeFailed, err.Error(), nil); serr != nil {
			return serr
		}
		return fmt.Errorf("take group snapshot %s: %w", g.Name, err)
	}
	return r.setStatus(ctx, g, topolvmv1.GroupSnapshotFailed, ReasonFailed, err.Error(), nil)
}

// member is a group member checked against its LogicalVolumes.
type member struct {
	source, snapshot *topolvmv1.LogicalVolume
}

func refusedf(reason string, format string, a ...any) error {
	return &groupsnapshot.RefusedError{Reason: groupsnapshot.Reason(reason), Message: fmt.Sprintf(format, a...)}
}

// request builds the engine's request. Members that do not belong to this group on this node are refused
// (a *groupsnapshot.RefusedError); a source not provisioned yet is an error to retry.
func (r *Reconciler) request(ctx context.Context, g *topolvmv1.LogicalVolumeGroupSnapshot) (groupsnapshot.Request, []member, error) {
	vg, thin, err := r.o.VolumeGroup(g.Spec.DeviceClass)
	if err != nil {
		return groupsnapshot.Request{}, nil, refusedf(ReasonUnknownClass, "device class %q: %v", g.Spec.DeviceClass, err)
	}
	if !thin {
		return groupsnapshot.Request{}, nil, refusedf(string(groupsnapshot.ReasonThickVolume),
			"device class %q is thick; group snapshots need a thin device class", g.Spec.DeviceClass)
	}
	req := groupsnapshot.Request{ID: string(g.UID)}
	var members []member
	for _, m := range g.Spec.Members {
		src, err := r.get(ctx, m.Source)
		if err != nil {
			return req, nil, err
		}
		snap, err := r.get(ctx, m.Snapshot)
		if err != nil {
			return req, nil, err
		}
		switch {
		case src == nil:
			return req, nil, refusedf(string(groupsnapshot.ReasonNotFound), "source LogicalVolume %s not found", m.Source)
		case snap == nil:
			return req, nil, refusedf(ReasonInvalidMember, "snapshot LogicalVolume %s not found; the CSI controller creates it before the group", m.Snapshot)
		case src.Spec.NodeName != r.o.NodeName || src.Spec.DeviceClass != g.Spec.DeviceClass:
			return req, nil, refusedf(ReasonInvalidMember, "source LogicalVolume %s is on node %s in device class %q, not on %s in %q like the group",
				src.Name, src.Spec.NodeName, src.Spec.DeviceClass, r.o.NodeName, g.Spec.DeviceClass)
		case snap.Spec.NodeName != r.o.NodeName || snap.Spec.DeviceClass != g.Spec.DeviceClass || snap.Spec.Source != src.Name ||
			snap.Labels[topolvmv1.GroupSnapshotMemberLabel] != g.Name || !snap.DeletionTimestamp.IsZero():
			return req, nil, refusedf(ReasonInvalidMember, "snapshot LogicalVolume %s is not a live snapshot of %s on node %s labelled %s=%s",
				snap.Name, src.Name, r.o.NodeName, topolvmv1.GroupSnapshotMemberLabel, g.Name)
		case src.Status.VolumeID == "":
			return req, nil, fmt.Errorf("source LogicalVolume %s has no volume yet", src.Name)
		}
		req.Members = append(req.Members, groupsnapshot.Member{VG: vg, Origin: src.Status.VolumeID, Snapshot: string(snap.UID)})
		members = append(members, member{source: src, snapshot: snap})
	}
	return req, members, nil
}

// get reads a LogicalVolume; nil when it does not exist.
func (r *Reconciler) get(ctx context.Context, name string) (*topolvmv1.LogicalVolume, error) {
	lv := &topolvmv1.LogicalVolume{}
	err := r.client.Get(ctx, types.NamespacedName{Name: name}, lv)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get LogicalVolume %s: %w", name, err)
	}
	return lv, nil
}

// memberReady gives a member snapshot LogicalVolume the status a single snapshot gets: its LV name (the
// object's uid) as volume ID and its origin's size. The member is read again on a conflict (its own
// reconciler adds its finalizer meanwhile), so that a group taken is not taken again for a stale read.
func (r *Reconciler) memberReady(ctx context.Context, m member) error {
	size := m.source.Spec.Size.DeepCopy()
	if m.source.Status.CurrentSize != nil {
		size = m.source.Status.CurrentSize.DeepCopy()
	}
	lv := m.snapshot
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if lv.Status.VolumeID == string(lv.UID) && lv.Status.CurrentSize != nil {
			return nil
		}
		lv.Status.VolumeID = string(lv.UID)
		lv.Status.CurrentSize = &size
		lv.Status.Code, lv.Status.Message = 0, ""
		err := r.client.Status().Update(ctx, lv)
		if apierrors.IsConflict(err) {
			fresh := &topolvmv1.LogicalVolume{}
			if gerr := r.reader().Get(ctx, types.NamespacedName{Name: lv.Name}, fresh); gerr != nil {
				return gerr
			}
			if fresh.UID != m.snapshot.UID {
				return fmt.Errorf("member LogicalVolume %s was replaced while its group was taken", lv.Name)
			}
			lv = fresh
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("update status of member LogicalVolume %s: %w", lv.Name, err)
	}
	return nil
}

func (r *Reconciler) reader() client.Reader {
	if r.o.Reader != nil {
		return r.o.Reader
	}
	return r.client
}

func (r *Reconciler) setStatus(ctx context.Context, g *topolvmv1.LogicalVolumeGroupSnapshot, phase topolvmv1.GroupSnapshotPhase, reason, message string, suspended *metav1.Duration) error {
	g.Status = topolvmv1.LogicalVolumeGroupSnapshotStatus{Phase: phase, Reason: reason, Message: message, SuspendTime: suspended, ObservedGeneration: g.Generation}
	if err := r.client.Status().Update(ctx, g); err != nil {
		return fmt.Errorf("update status of LogicalVolumeGroupSnapshot %s: %w", g.Name, err)
	}
	return nil
}
