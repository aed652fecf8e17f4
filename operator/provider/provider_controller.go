package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/nodeselect"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/inventory"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/noderemoval"
	"github.com/lvms-dev/lvms/operator/nodeset"
)

// Reconciler maintains the shared driver objects of one namespace. Its single reconcile key is
// Namespace/names.NodeAgent.
type Reconciler struct {
	Client    client.Client
	Namespace string
	Agent     AgentOptions
	// Names select TopoLVM's group (topolvm.io, or topolvm.cybozu.com in legacy mode): the CSIDriver's
	// name and --legacy on the node agents.
	Names driver.Names

	applied appliedMemo
	// selected is what the selectors matched at the last reconcile (nil before the first one or while a
	// selector is invalid): see agentPlanned.
	selected atomic.Pointer[selection]
}

// selection is the union of the sets' and cluster's node selectors: every node, or the nodes match matches.
type selection struct {
	all   bool
	match *nodeaffinity.NodeSelector
}

// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=csidrivers,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the controller: every LVMNodeSet and LVMCluster change, and changes to the
// objects it writes, reconcile the one key. Per-node events (LVMNodes, Nodes, the agents' finalizers on
// LVMVolumeGroups) come in bursts as a cluster or a set grows and each calls for a pass over every LVMNode:
// they are coalesced into one reconcile (nodeset.Coalesced).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	keyOf := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: r.Namespace, Name: names.NodeAgent}}}
	}
	key, later := handler.EnqueueRequestsFromMapFunc(keyOf), nodeset.Coalesced(keyOf)
	return ctrl.NewControllerManagedBy(mgr).
		Named("provider").
		Watches(&lvmv2.LVMNodeSet{}, key, builder.WithPredicates(nodeset.SpecOrDeletionChanged())).
		Watches(&lvmv1.LVMCluster{}, key, builder.WithPredicates(nodeset.SpecOrDeletionChanged())).
		Watches(&appsv1.DaemonSet{}, key, builder.WithPredicates(nodeset.SpecOrDeletionChanged())).
		Watches(&storagev1.CSIDriver{}, key).
		Watches(&lvmv2.LVMNode{}, later, builder.WithPredicates(r.lvmNodesToKeep())).
		Watches(&lvmv1.LVMVolumeGroup{}, later).
		Watches(&corev1.Node{}, later, builder.WithPredicates(nodeset.NodePlacementChanged())).
		Complete(r)
}

// keepAgents adds to p the nodes no selector matches any more where an agent still has work: a node with
// an LVMNode (a set keeps its volume groups there for the volumes on it, or waits for the agent to remove
// them) or named by an agent's finalizer on an LVMVolumeGroup. Otherwise the DaemonSet would take the agent
// away first, and nothing would serve those volumes or finish the removal. Only those nodes are read and
// matched, not every Node.
func (r *Reconciler) keepAgents(ctx context.Context, p *placement) error {
	union := nodeselect.Union(p.selectors)
	if union == nil {
		r.selected.Store(&selection{all: true})
		return nil // every node runs an agent
	}
	match, err := nodeaffinity.NewNodeSelector(union)
	if err != nil {
		r.selected.Store(nil)
		return nil // an invalid selector is reported by its set or cluster
	}
	r.selected.Store(&selection{match: match})
	var vgs lvmv1.LVMVolumeGroupList
	if err := r.Client.List(ctx, &vgs, client.InNamespace(r.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list LVMVolumeGroups: %w", err)
	}
	var lvmNodes lvmv2.LVMNodeList
	if err := r.Client.List(ctx, &lvmNodes, client.InNamespace(r.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list LVMNodes: %w", err)
	}
	// Candidates: nodes with an LVMNode, and nodes a finalizer names after its last "/".
	candidates := make(map[string]bool, len(lvmNodes.Items))
	for i := range lvmNodes.Items {
		candidates[lvmNodes.Items[i].Name] = true
	}
	var shortened []string
	for i := range vgs.Items {
		for _, f := range vgs.Items[i].Finalizers {
			if j := strings.LastIndex(f, "/"); j >= 0 {
				candidates[f[j+1:]] = true
				if len(f)-j-1 == maxNodeFinalizerName {
					shortened = append(shortened, f)
				}
			}
		}
	}
	var keep []string
	var n corev1.Node
	for name := range candidates {
		switch err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &n, client.UnsafeDisableDeepCopy); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("get Node %s: %w", name, err)
		case !match.Match(&n):
			keep = append(keep, name)
		}
	}
	if len(shortened) > 0 {
		// The agent shortens the finalizer of a node whose name is too long for one: only comparing each
		// long-named Node with it finds the node.
		var nodes corev1.NodeList
		if err := r.Client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("list Nodes: %w", err)
		}
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if len(n.Name) > maxNodeFinalizerName && !candidates[n.Name] && !match.Match(n) &&
				slices.ContainsFunc(shortened, func(f string) bool { return noderemoval.IsNodeFinalizer(f, n.Name) }) {
				keep = append(keep, n.Name)
			}
		}
	}
	slices.Sort(keep)
	if len(keep) > 0 {
		p.selectors = append(p.selectors, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: keep}},
		}}})
	}
	return nil
}

// maxNodeFinalizerName is the longest node name the agent's finalizer holds as it is; it shortens longer
// ones to this length.
const maxNodeFinalizerName = 63

// lvmNodesToKeep passes the LVMNode events that can change the nodes keepAgents keeps: deletions, and
// creations on nodes the selectors did not match at the last reconcile. A set creates LVMNodes on the nodes
// it selects, thousands at once as it converges; each of those passed made a pass over every LVMNode, so
// the operator's CPU grew with the square of the nodes.
func (r *Reconciler) lvmNodesToKeep() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return !r.agentPlanned(e.Object.GetName()) },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// agentPlanned reports whether the selectors matched node at the last reconcile, as the cache shows the
// Node (false when unknown: the reconcile decides).
func (r *Reconciler) agentPlanned(node string) bool {
	sel := r.selected.Load()
	switch {
	case sel == nil:
		return false
	case sel.all:
		return true
	}
	var n corev1.Node
	if err := r.Client.Get(context.Background(), client.ObjectKey{Name: node}, &n, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	return sel.match.Match(&n)
}

// Reconcile applies or prunes the driver objects.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	// The sets and clusters only: which nodes they select is not needed (the DaemonSet carries their
	// selectors), and selecting every Node on every reconcile was most of the operator's CPU at scale.
	inv, err := inventory.ObserveClaimants(ctx, r.Client, r.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	placement := placementOf(inv)
	if !placement.any {
		r.selected.Store(nil)
		return ctrl.Result{}, r.prune(ctx)
	}
	if err := r.keepAgents(ctx, &placement); err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	for _, driver := range r.csiDrivers(placement.shared) {
		if err := r.applyCSIDriver(ctx, driver); err != nil {
			errs = append(errs, err)
		}
	}
	if !placement.shared {
		if err := r.deleteOwned(ctx, &storagev1.CSIDriver{}, client.ObjectKey{Name: names.SharedCSIDriverName}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.applyDaemonSet(ctx, r.daemonSet(placement)); err != nil {
		errs = append(errs, err)
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// placement is where the node agent must run.
type placement struct {
	any         bool
	selectors   []*corev1.NodeSelector
	tolerations [][]corev1.Toleration
	external    bool
	shared      bool
}

func placementOf(inv *inventory.Inventory) placement {
	var p placement
	for _, s := range inv.NodeSets {
		p.any = true
		p.selectors = append(p.selectors, s.Spec.NodeSelector)
		p.tolerations = append(p.tolerations, s.Spec.Tolerations)
		for _, vg := range s.Spec.Template.VolumeGroups {
			p.shared = p.shared || vg.AccessPolicy == lvmv2.AccessPolicyShared
		}
	}
	if c := inv.Active; c != nil {
		p.any = true
		p.tolerations = append(p.tolerations, c.Spec.Tolerations)
		if c.Spec.ConfigurationPolicy == lvmv1.ConfigurationPolicyExternal {
			p.external = true
			p.selectors = append(p.selectors, nil)
		}
		for _, dc := range c.Spec.Storage.DeviceClasses {
			p.selectors = append(p.selectors, dc.NodeSelector)
			p.shared = p.shared || dc.DeviceAccessPolicy.Normalized() == lvmv1.DeviceAccessPolicyShared
		}
	}
	return p
}

func (r *Reconciler) labels() map[string]string {
	return map[string]string{
		names.ManagedByLabel:      names.ManagedByValue,
		names.OwnerNamespaceLabel: r.Namespace,
		names.NameLabel:           names.AppName,
		names.ComponentLabel:      names.ComponentNodeAgent,
	}
}

// owned reports whether a cluster-scoped object was written for this namespace.
func (r *Reconciler) owned(o client.Object) bool {
	l := o.GetLabels()
	return l[names.ManagedByLabel] == names.ManagedByValue && l[names.OwnerNamespaceLabel] == r.Namespace
}

func (r *Reconciler) applyCSIDriver(ctx context.Context, d *storagev1.CSIDriver) error {
	var existing storagev1.CSIDriver
	err := r.Client.Get(ctx, client.ObjectKey{Name: d.Name}, &existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get CSIDriver %s: %w", d.Name, err)
	case !r.owned(&existing) && existing.Labels[names.ManagedByLabel] == names.ManagedByValue:
		return fmt.Errorf("CSIDriver %s was created for the LVMS installation in namespace %s: run one LVMS operator per cluster, or delete the CSIDriver if that installation is gone",
			d.Name, existing.Labels[names.OwnerNamespaceLabel])
	}
	cfg := csiDriverConfig(d)
	key, sum, known := "CSIDriver/"+d.Name, [32]byte{}, false
	if sum, known = fingerprint(cfg); known && r.applied.current(key, sum, existing.ResourceVersion) {
		return nil
	}
	err = r.Client.Apply(ctx, cfg, client.FieldOwner(names.FieldOwner), client.ForceOwnership)
	if apierrors.IsInvalid(err) && existing.Name != "" {
		// attachRequired and volumeLifecycleModes are immutable; replacing the object is how they change.
		if err := r.Client.Delete(ctx, &existing); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replace CSIDriver %s: %w", d.Name, err)
		}
		err = r.Client.Apply(ctx, cfg, client.FieldOwner(names.FieldOwner), client.ForceOwnership)
	}
	if err != nil {
		r.applied.record(key, sum, "")
		return fmt.Errorf("apply CSIDriver %s: %w", d.Name, err)
	}
	if known {
		r.applied.record(key, sum, ptrValue(cfg.ResourceVersion))
	}
	return nil
}

// applyDaemonSet applies the node agent's DaemonSet unless the same configuration is already applied to
// the version the cache holds.
func (r *Reconciler) applyDaemonSet(ctx context.Context, cfg *appsv1ac.DaemonSetApplyConfiguration) error {
	key := "DaemonSet/" + names.NodeAgent
	sum, known := fingerprint(cfg)
	var live appsv1.DaemonSet
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: names.NodeAgent}, &live); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("get DaemonSet %s: %w", names.NodeAgent, err)
	}
	if known && r.applied.current(key, sum, live.ResourceVersion) {
		return nil
	}
	if err := r.Client.Apply(ctx, cfg, client.FieldOwner(names.FieldOwner), client.ForceOwnership); err != nil {
		r.applied.record(key, sum, "")
		return fmt.Errorf("apply DaemonSet %s: %w", names.NodeAgent, err)
	}
	if known {
		r.applied.record(key, sum, ptrValue(cfg.ResourceVersion))
	}
	return nil
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// prune deletes every driver object of this namespace: nothing needs the agent any more. The agent's
// ServiceAccount, RBAC and admission policy are installed with the operator (deploy/nodeagent) and stay.
func (r *Reconciler) prune(ctx context.Context) error {
	var errs []error
	ns := r.Namespace
	for _, o := range []struct {
		obj client.Object
		key client.ObjectKey
	}{
		{&appsv1.DaemonSet{}, client.ObjectKey{Namespace: ns, Name: names.NodeAgent}},
		// Both groups' drivers: one of them may be left from before a switch of --legacy.
		{&storagev1.CSIDriver{}, client.ObjectKey{Name: driver.New(false).Driver()}},
		{&storagev1.CSIDriver{}, client.ObjectKey{Name: driver.New(true).Driver()}},
		{&storagev1.CSIDriver{}, client.ObjectKey{Name: names.SharedCSIDriverName}},
	} {
		if err := r.deleteOwned(ctx, o.obj, o.key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteOwned deletes the object at key if the operator wrote it for this namespace.
func (r *Reconciler) deleteOwned(ctx context.Context, obj client.Object, key client.ObjectKey) error {
	if err := r.Client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get %T %s: %w", obj, key.Name, err)
	}
	if !r.owned(obj) || obj.GetDeletionTimestamp() != nil {
		return nil
	}
	if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %T %s: %w", obj, key.Name, err)
	}
	return nil
}
