package lvmcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/claims"
	"github.com/lvms-dev/lvms/operator/classes"
	"github.com/lvms-dev/lvms/operator/finalizers"
	"github.com/lvms-dev/lvms/operator/inventory"
	"github.com/lvms-dev/lvms/operator/laststatus"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/nodeset"
)

// Reconciler reconciles the LVMClusters of one namespace.
type Reconciler struct {
	Client    client.Client
	Recorder  events.EventRecorder
	Namespace string
	// Names select TopoLVM's group (topolvm.io, or topolvm.cybozu.com in legacy mode) of the generated
	// classes and of the CSIDriver the cluster waits for.
	Names driver.Names
	// AgentReportTimeout: how long a node may wait for its agent's first report before it counts as Degraded.
	AgentReportTimeout time.Duration
	// Clock tells the time (default the real clock; tests pass a fake).
	Clock clock.PassiveClock
	// Admission, when set, says whether the admission policies that confine the node agents are in place
	// (operator/admission): while not, the ResourcesAvailable condition says what to apply.
	Admission nodeset.Admission

	// written: the status last written per cluster, for reconciles that start before the cache has it.
	written laststatus.Memory[*lvmv1.LVMClusterStatus]
}

// +kubebuilder:rbac:groups=lvm.topolvm.io,resources=lvmclusters;lvmvolumegroups;lvmvolumegroupnodestatuses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=lvm.topolvm.io,resources=lvmclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=lvm.topolvm.io,resources=lvmclusters/finalizers;lvmvolumegroups/finalizers;lvmvolumegroupnodestatuses/finalizers,verbs=update

// scope carries what one reconcile observed and did.
type scope struct {
	cluster *lvmv1.LVMCluster
	before  *lvmv1.LVMCluster
	now     time.Time
	// inv, refusedBy and assignment are set before any phase runs. refusedBy names the LVMCluster that
	// is managed instead of this one ("" when this one is managed).
	inv        *inventory.Inventory
	refusedBy  string
	assignment *claims.Assignment
	// applyErrs collects what failed while applying resources (all phases).
	applyErrs []error
	// classes is set by reconcileClasses.
	classes classes.Result
	// removing lists device classes whose LVMVolumeGroup is being torn down, with what that waits for.
	removing []string
	// deletionBlockers is set by reconcileDelete.
	deletionBlockers string
}

// Reconcile runs one reconcile of the LVMCluster named by req.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	c := &lvmv1.LVMCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if st, ok := r.written.Recall(c); ok {
		c.Status = *st
	}
	if added, err := finalizers.Ensure(ctx, r.Client, c, names.ClusterFinalizer); err != nil || added {
		return ctrl.Result{}, err
	}
	inv, err := inventory.Observe(ctx, r.Client, r.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &scope{cluster: c, before: c.DeepCopy(), now: r.now(), inv: inv, assignment: &claims.Assignment{}}
	if inv.Active != nil && inv.Active.UID != c.UID {
		s.refusedBy = inv.Active.Name
	} else if res := claims.Compute(inv.ClaimsInput()); res.Cluster != nil {
		s.assignment = res.Cluster
	}
	defer func() {
		if c.DeletionTimestamp != nil && s.deletionBlockers == "" && reterr == nil {
			return
		}
		r.updateStatus(ctx, s)
		if err := r.patchStatus(ctx, s); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	if c.DeletionTimestamp != nil {
		return r.reconcileDelete(ctx, s)
	}
	if s.refusedBy != "" {
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, s)
}

func (r *Reconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock.Now()
	}
	return time.Now()
}

func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	r.reconcileVolumeGroups(ctx, s)
	r.reconcileNodeStatuses(ctx, s)
	set := classes.ForCluster(s.cluster, r.Names)
	set.Adopt, set.Yield = classHandOver(s)
	res, err := classes.Apply(ctx, r.Client, set)
	s.classes = res
	if err != nil {
		s.applyErrs = append(s.applyErrs, err)
	}
	return ctrl.Result{RequeueAfter: r.nextReportDeadline(s)}, errors.Join(s.applyErrs...)
}

// classHandOver is the mirror of the LVMNodeSet's rule (operator/nodeset classHandOver): a set migrated from
// this cluster gets the cluster's classes of the same name once the cluster manages none of the set's nodes;
// while it manages one (for example after a rollback handed a node back), or the set is being deleted, the
// cluster takes them back in place.
func classHandOver(s *scope) (adopt, yield []classes.Owner) {
	for _, set := range s.inv.NodeSets {
		if set.Annotations[names.MigratedFromAnnotation] != s.cluster.Name {
			continue
		}
		owner := classes.Owner{Kind: names.KindNodeSet, Namespace: set.Namespace, Name: set.Name}
		if set.DeletionTimestamp != nil ||
			slices.ContainsFunc(s.inv.Selected[set.Name], func(n string) bool { return contains(s.assignment.Managed, n) }) {
			adopt = append(adopt, owner)
		} else {
			yield = append(yield, owner)
		}
	}
	return adopt, yield
}

// nextReportDeadline is when a managed node still waiting for its first report times out (0: none).
func (r *Reconciler) nextReportDeadline(s *scope) time.Duration {
	if r.AgentReportTimeout <= 0 {
		return 0
	}
	var next time.Duration
	for _, node := range s.assignment.Managed {
		st := s.inv.NodeStatuses[node]
		if st == nil || len(st.Spec.LVMVGStatus) > 0 || st.Status.ObservedGeneration != 0 {
			continue
		}
		left := st.CreationTimestamp.Add(r.AgentReportTimeout).Sub(s.now)
		if left > 0 && (next == 0 || left < next) {
			next = left + time.Second
		}
	}
	return next
}

func (r *Reconciler) updateStatus(ctx context.Context, s *scope) {
	in := statusInput{
		Generation:       s.cluster.Generation,
		RefusedBy:        s.refusedBy,
		Deleting:         s.cluster.DeletionTimestamp != nil,
		DeletionBlockers: s.deletionBlockers,
		External:         s.cluster.Spec.ConfigurationPolicy == lvmv1.ConfigurationPolicyExternal,
		ApplyErr:         errors.Join(s.applyErrs...),
		Taken:            s.classes.Taken,
		Removing:         s.removing,
		Missing:          r.missingDriverObjects(ctx),
		Now:              s.now,
		ReportTimeout:    r.AgentReportTimeout,
	}
	if r.Admission != nil {
		in.Unconfined = r.Admission.Problem()
	}
	for _, cf := range s.assignment.Conflicts {
		in.Conflicts = append(in.Conflicts, cf.Message())
	}
	for _, dc := range s.cluster.Spec.Storage.DeviceClasses {
		cls := classInput{Name: dc.Name, SelectErr: s.inv.ClusterSelectErr[dc.Name]}
		for _, node := range s.inv.ClassNodes[dc.Name] {
			if contains(s.assignment.Managed, node) {
				cls.Nodes = append(cls.Nodes, node)
			}
		}
		in.Classes = append(in.Classes, cls)
	}
	for _, node := range s.assignment.Managed {
		in.NodeStatuses = append(in.NodeStatuses, nodeStatusInput{Node: node, Status: s.inv.NodeStatuses[node]})
	}
	setStatus(&s.cluster.Status, in)
	r.emitTransitionEvents(s)
}

func (r *Reconciler) missingDriverObjects(ctx context.Context) []string {
	var missing []string
	var csiDriver storagev1.CSIDriver
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Names.Driver()}, &csiDriver); apierrors.IsNotFound(err) {
		missing = append(missing, "CSIDriver "+r.Names.Driver())
	}
	var ds appsv1.DaemonSet
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: names.NodeAgent}, &ds); apierrors.IsNotFound(err) {
		missing = append(missing, "DaemonSet "+names.NodeAgent)
	}
	return missing
}

func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	if equality.Semantic.DeepEqual(s.before.Status, s.cluster.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, s.cluster, client.MergeFrom(s.before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of LVMCluster %s: %w", s.cluster.Name, err)
	}
	r.written.Remember(s.cluster, s.before.ResourceVersion, &s.cluster.Status)
	return nil
}

func (r *Reconciler) emitTransitionEvents(s *scope) {
	if r.Recorder == nil {
		return
	}
	old, cur := s.before.Status, s.cluster.Status
	if old.State != cur.State || (cur.State != lvmv1.LVMStatusReady && old.Message != cur.Message && s.cluster.DeletionTimestamp != nil) {
		kind := corev1.EventTypeNormal
		if cur.State == lvmv1.LVMStatusFailed || cur.State == lvmv1.LVMStatusDegraded {
			kind = corev1.EventTypeWarning
		}
		note := fmt.Sprintf("LVMCluster is now %s", cur.State)
		if cur.Message != "" {
			note += ": " + cur.Message
		}
		r.Recorder.Eventf(s.cluster, nil, kind, string(cur.State), "Reconcile", "%s", truncate(note))
	}
	if conditionText(old.Conditions, ConditionNoConflicts) != conditionText(cur.Conditions, ConditionNoConflicts) {
		for _, c := range s.assignment.Conflicts {
			r.Recorder.Eventf(s.cluster, nil, corev1.EventTypeWarning, "Conflict", "Claim", "%s", truncate(c.Message()))
		}
	}
}
