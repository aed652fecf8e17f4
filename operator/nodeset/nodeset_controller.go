package nodeset

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
	"sigs.k8s.io/controller-runtime/pkg/event"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/claims"
	"github.com/lvms-dev/lvms/operator/classes"
	"github.com/lvms-dev/lvms/operator/finalizers"
	"github.com/lvms-dev/lvms/operator/inventory"
	"github.com/lvms-dev/lvms/operator/laststatus"
	"github.com/lvms-dev/lvms/operator/names"
)

// DefaultAgentReportTimeout is how long a new LVMNode may wait for the node agent's first report before
// its node counts as Unknown.
const DefaultAgentReportTimeout = 5 * time.Minute

// Reconciler reconciles the LVMNodeSets of one namespace.
type Reconciler struct {
	Client    client.Client
	Recorder  events.EventRecorder
	Namespace string
	// Names select TopoLVM's group (topolvm.io, or topolvm.cybozu.com in legacy mode) of the generated
	// classes and of the CSIDriver the set waits for.
	Names driver.Names
	// AgentReportTimeout: see DefaultAgentReportTimeout. Zero disables the timeout.
	AgentReportTimeout time.Duration
	// Clock tells the time (default the real clock; tests pass a fake).
	Clock clock.PassiveClock
	// AppliesPerPass bounds the LVMNodes one reconcile applies (default DefaultAppliesPerPass): a set over
	// thousands of nodes writes its status between batches instead of only after applying them all.
	AppliesPerPass int
	// Admission, when set, says whether the admission policies that confine the node agents are in place
	// (operator/admission): while not, the set's ProviderReady condition says what to apply.
	Admission Admission

	// written: the status last written per set, for reconciles that start before the cache has it.
	written laststatus.Memory[*lvmv2.LVMNodeSetStatus]
}

// Admission is what the set's status needs of operator/admission's Guard.
type Admission interface {
	// Problem says what is wrong with the admission policies ("" when nothing, or not looked at yet).
	Problem() string
	// Subscribe gets an event whenever Problem's answer changes.
	Subscribe() <-chan event.GenericEvent
}

// DefaultAppliesPerPass is Reconciler.AppliesPerPass's default: about 8 s of applies on a busy API server.
const DefaultAppliesPerPass = 1000

// +kubebuilder:rbac:groups=lvm.topolvm.io,resources=lvmnodesets;lvmnodes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=lvm.topolvm.io,resources=lvmnodesets/status;lvmnodes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=lvm.topolvm.io,resources=lvmnodesets/finalizers,verbs=update
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshotclasses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch

// scope carries what one reconcile observed and did; updateStatus derives the status from it.
type scope struct {
	set    *lvmv2.LVMNodeSet
	before *lvmv2.LVMNodeSet
	now    time.Time
	// inv and all are set before any phase runs; assignment is the set's part of all.
	inv        *inventory.Inventory
	all        claims.Result
	assignment *claims.Assignment
	// applying holds the nodes whose LVMNode did not match the template when the reconcile began: applied by
	// it, failed, or left to the next one (deferred counts those); their LVMNode's status is not the set's yet.
	applying map[string]bool
	applyErr map[string]error
	deferred int
	// withdrawing maps nodes the set is being removed from to what that waits for (reconcileNodes).
	withdrawing map[string]string
	// removalBlocked maps nodes that left the set but still hold its volumes to the message naming them.
	removalBlocked map[string]string
	// classes and classErr are set by reconcileClasses.
	classes  classes.Result
	classErr error
	// deletionBlockers is set by reconcileDelete: what deletion waits for.
	deletionBlockers string
	// retained lists messages about volume groups the node agent left on nodes because they hold data.
	retained []string
}

// Reconcile runs one reconcile of the LVMNodeSet named by req.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	set := &lvmv2.LVMNodeSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if st, ok := r.written.Recall(set); ok {
		set.Status = *st
	}
	if added, err := finalizers.Ensure(ctx, r.Client, set, names.NodeSetFinalizer); err != nil || added {
		return ctrl.Result{}, err
	}
	s := &scope{set: set, before: set.DeepCopy(), now: r.now(), applying: map[string]bool{}, applyErr: map[string]error{}, withdrawing: map[string]string{}, removalBlocked: map[string]string{}}
	inv, err := inventory.Observe(ctx, r.Client, r.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.inv = inv
	s.all = claims.Compute(inv.ClaimsInput())
	s.assignment = s.all.NodeSet(set.Name)

	var res ctrl.Result
	defer func() {
		if set.DeletionTimestamp != nil && s.deletionBlockers == "" && reterr == nil {
			return // the finalizer is gone: so is the set
		}
		r.updateStatus(ctx, s)
		if err := r.patchStatus(ctx, s); err != nil {
			reterr = errors.Join(reterr, err)
		}
	}()
	if set.DeletionTimestamp != nil {
		res, err = r.reconcileDelete(ctx, s)
	} else {
		res, err = r.reconcileNormal(ctx, s)
	}
	return res, err
}

func (r *Reconciler) now() time.Time {
	if r.Clock != nil {
		return r.Clock.Now()
	}
	return time.Now()
}

func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	errNodes := r.reconcileNodes(ctx, s, s.assignment.Managed)
	errMarks := r.reconcileConflictConditions(ctx, s)
	r.reconcileClasses(ctx, s)
	next := r.nextReportDeadline(s)
	if s.deferred > 0 && (next == 0 || next > CoalesceDelay) {
		// The next batch, once the cache shows this one (it is not applied again).
		next = CoalesceDelay
	}
	return ctrl.Result{RequeueAfter: next}, errors.Join(errNodes, errMarks)
}

func (r *Reconciler) reconcileClasses(ctx context.Context, s *scope) {
	set := classes.ForNodeSet(s.set, r.Names)
	set.Adopt, set.Yield = classHandOver(s)
	s.classes, s.classErr = classes.Apply(ctx, r.Client, set)
}

// classHandOver decides the classes of the LVMCluster a set is migrated from: the set leaves them to the
// cluster while the cluster still manages one of the set's nodes, and adopts them in place once it manages
// none (every node handed over, or the cluster gone). The LVMCluster applies the mirror rule, so the two never
// take a class from each other.
func classHandOver(s *scope) (adopt, yield []classes.Owner) {
	from := s.set.Annotations[names.MigratedFromAnnotation]
	if from == "" {
		return nil, nil
	}
	owner := []classes.Owner{{Kind: names.KindCluster, Namespace: s.set.Namespace, Name: from}}
	if s.inv.Active != nil && s.inv.Active.Name == from && s.all.Cluster != nil &&
		slices.ContainsFunc(s.inv.Selected[s.set.Name], func(n string) bool { return slices.Contains(s.all.Cluster.Managed, n) }) {
		return nil, owner
	}
	return owner, nil
}

// nextReportDeadline is when a node still waiting for its agent's first report times out (0 when none is).
func (r *Reconciler) nextReportDeadline(s *scope) time.Duration {
	if r.AgentReportTimeout <= 0 {
		return 0
	}
	var next time.Duration
	for _, name := range s.assignment.Managed {
		n := s.inv.LVMNodes[name]
		if n == nil || n.Status.ObservedGeneration != 0 || n.Status.State != "" {
			continue
		}
		left := n.CreationTimestamp.Add(r.AgentReportTimeout).Sub(s.now)
		if left > 0 && (next == 0 || left < next) {
			next = left + time.Second
		}
	}
	return next
}

// updateStatus derives the set's status from the scope.
func (r *Reconciler) updateStatus(ctx context.Context, s *scope) {
	set := s.set
	vgs, dcs := templateNames(set)
	var summaries []lvmv2.NodeSummary
	seen := map[string]bool{}
	add := func(in nodeInput) {
		if seen[in.Name] {
			return
		}
		seen[in.Name] = true
		in.Node = s.inv.Nodes[in.Name]
		in.LVMNode = s.inv.LVMNodes[in.Name]
		in.VolumeGroups, in.DeviceClasses = vgs, dcs
		if in.LVMNode != nil {
			in.Exclusive = len(inventory.NodeSetOwners(in.LVMNode)) <= 1
		}
		summaries = append(summaries, summarizeNode(in, s.now, r.AgentReportTimeout))
	}
	for name, msg := range s.withdrawing {
		add(nodeInput{Name: name, Withdrawing: msg})
	}
	for name, msg := range s.removalBlocked {
		if msg != "" {
			add(nodeInput{Name: name, RemovalBlocked: msg})
		}
	}
	lost := map[string]*claims.Conflict{}
	var conflicts []string
	for i, c := range s.assignment.Conflicts {
		conflicts = append(conflicts, c.Message())
		if !c.Kept {
			if _, ok := lost[c.Node]; !ok {
				lost[c.Node] = &s.assignment.Conflicts[i]
			}
		}
	}
	for _, name := range s.inv.Selected[set.Name] {
		in := nodeInput{Name: name, Conflict: lost[name], Applying: s.applying[name], ApplyErr: s.applyErr[name]}
		in.Managed = in.Conflict == nil
		if contains(s.assignment.Waiting, name) {
			in.Waiting, in.Managed = true, false
		}
		add(in)
	}
	sortSummaries(summaries)

	in := statusInput{
		Generation:       set.Generation,
		Deleting:         set.DeletionTimestamp != nil,
		DeletionBlockers: s.deletionBlockers,
		SelectErr:        s.inv.SelectErr[set.Name],
		Nodes:            summaries,
		RemovalBlocked:   slices.ContainsFunc(summaries, func(n lvmv2.NodeSummary) bool { return s.removalBlocked[n.Name] != "" }),
		Conflicts:        dedupe(conflicts),
		Provider:         r.observeProvider(ctx, s),
	}
	setStatus(&set.Status, in)
	r.emitTransitionEvents(s)
}

// observeProvider checks the driver objects the provider controller maintains and what class generation did.
func (r *Reconciler) observeProvider(ctx context.Context, s *scope) providerInput {
	p := providerInput{
		Unmanaged:            s.set.Spec.Provider.Strategy == lvmv2.ProviderUnmanaged,
		Taken:                s.classes.Taken,
		SnapshotsUnavailable: s.classes.SnapshotsUnavailable,
		Err:                  s.classErr,
	}
	if r.Admission != nil {
		p.Unconfined = r.Admission.Problem()
	}
	var csiDriver storagev1.CSIDriver
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Names.Driver()}, &csiDriver); apierrors.IsNotFound(err) {
		p.Missing = append(p.Missing, "CSIDriver "+r.Names.Driver())
	} else if err != nil && p.Err == nil {
		p.Err = err
	}
	var ds appsv1.DaemonSet
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: names.NodeAgent}, &ds); apierrors.IsNotFound(err) {
		p.Missing = append(p.Missing, "DaemonSet "+names.NodeAgent)
	} else if err != nil && p.Err == nil {
		p.Err = err
	}
	return p
}

// patchStatus writes the status when it changed.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	if equality.Semantic.DeepEqual(s.before.Status, s.set.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, s.set, client.MergeFrom(s.before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of LVMNodeSet %s: %w", s.set.Name, err)
	}
	r.written.Remember(s.set, s.before.ResourceVersion, &s.set.Status)
	return nil
}

// emitTransitionEvents records an event when the set's state or conflicts change.
func (r *Reconciler) emitTransitionEvents(s *scope) {
	if r.Recorder == nil {
		return
	}
	old, cur := s.before.Status, s.set.Status
	if old.State != cur.State {
		kind := corev1.EventTypeNormal
		if cur.State != lvmv2.StateReady && cur.State != lvmv2.StateProgressing && cur.State != lvmv2.StateDeleting {
			kind = corev1.EventTypeWarning
		}
		note := fmt.Sprintf("LVMNodeSet is now %s", cur.State)
		if cur.Message != "" {
			note += ": " + cur.Message
		}
		r.Recorder.Eventf(s.set, nil, kind, string(cur.State), "Reconcile", "%s", truncate(note))
	}
	oldC, curC := conditionMessage(old, lvmv2.ConditionNoConflicts), conditionMessage(cur, lvmv2.ConditionNoConflicts)
	if oldC != curC {
		for _, c := range s.assignment.Conflicts {
			r.Recorder.Eventf(s.set, nil, corev1.EventTypeWarning, ReasonConflict, "Claim", "%s", truncate(c.Message()))
		}
	}
	for _, name := range sortedKeys(s.removalBlocked) {
		if m := s.removalBlocked[name]; m != "" && nodeMessage(old, name) != m {
			r.Recorder.Eventf(s.set, nil, corev1.EventTypeWarning, ReasonRemovalBlocked, "Remove", "%s", truncate(m))
		}
	}
	for _, m := range s.retained {
		r.Recorder.Eventf(s.set, nil, corev1.EventTypeWarning, "DataRetained", "Remove", "%s", truncate(m))
	}
}

// nodeMessage is the message of node in a status ("" when it is not listed).
func nodeMessage(st lvmv2.LVMNodeSetStatus, node string) string {
	for _, n := range st.Nodes {
		if n.Name == node {
			return n.Message
		}
	}
	return ""
}
