package nodeset

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/names"
)

// SetupWithManager registers the controller. Any change that can move a node between sets or the
// LVMCluster (Nodes, LVMNodes, LVMClusters, NodeStatuses) re-evaluates every set of the namespace: claims
// are decided over the whole namespace. Generated classes map back to their set through owner labels;
// deleted PVCs wake sets whose deletion waits for them, deleted PVs every set (a node that left a set may
// keep its volume groups for them). Events that come in bursts, one per node or volume (and the set's own
// status writes), are coalesced: see Coalesced.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(r.allSets)
	allLater := Coalesced(r.allSets)
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Admission != nil {
		b = b.WatchesRawSource(source.Channel(r.Admission.Subscribe(), all))
	}
	return b.
		Named("lvmnodeset").
		For(&lvmv2.LVMNodeSet{}, builder.WithPredicates(predicate.Not(statusOnly()))).
		Watches(&lvmv2.LVMNodeSet{}, Coalesced(self), builder.WithPredicates(statusOnly())).
		Watches(&lvmv2.LVMNodeSet{}, all, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&lvmv2.LVMNode{}, allLater).
		Watches(&lvmv1.LVMCluster{}, all, builder.WithPredicates(SpecOrDeletionChanged())).
		Watches(&lvmv1.LVMVolumeGroupNodeStatus{}, allLater, builder.WithPredicates(ownerRefsChanged())).
		Watches(&corev1.Node{}, allLater, builder.WithPredicates(NodePlacementChanged())).
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(r.ownerOfClass)).
		Watches(&storagev1.CSIDriver{}, all).
		Watches(&appsv1.DaemonSet{}, all, builder.WithPredicates(SpecOrDeletionChanged())).
		Watches(&corev1.PersistentVolumeClaim{}, Coalesced(r.deletingSets), builder.WithPredicates(deletesOnly())).
		Watches(&corev1.PersistentVolume{}, allLater, builder.WithPredicates(deletesOnly())).
		Complete(r)
}

// CoalesceDelay is how long Coalesced holds a request back.
const CoalesceDelay = 500 * time.Millisecond

// Coalesced is handler.EnqueueRequestsFromMapFunc for events that come in bursts and each call for a
// reconcile over the whole namespace: thousands of LVMNodes created and reporting while a set converges,
// Nodes joining, volumes deleted. It adds the requests CoalesceDelay after the event; the queue holds a
// request once, at its earliest time, so every event until then rides on that one reconcile. Without it
// each event of a burst of N ran its own O(N) reconcile: quadratic in the cluster's size.
func Coalesced(fn handler.MapFunc) handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, o := range objs {
			for _, req := range fn(ctx, o) {
				q.AddAfter(req, CoalesceDelay)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
	}
}

func self(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

// statusOnly passes updates that change nothing but the status (and the resource version): mostly the
// set's own status writes, one per reconcile while its nodes converge.
func statusOnly() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() == n.GetGeneration() &&
				o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) &&
				equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) &&
				equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) &&
				equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) &&
				equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences())
		},
	}
}

// listSets lists the sets a watch event maps to: the cache's own objects, read only. Copying each set (its
// status lists up to MaxStatusNodes nodes) on every LVMNode event made a fifth of the operator's garbage
// while 5,000 nodes converged.
func (r *Reconciler) listSets(ctx context.Context) []lvmv2.LVMNodeSet {
	var sets lvmv2.LVMNodeSetList
	if err := r.Client.List(ctx, &sets, client.InNamespace(r.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list LVMNodeSets for a watch event")
		return nil
	}
	return sets.Items
}

func (r *Reconciler) allSets(ctx context.Context, _ client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, s := range r.listSets(ctx) {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
	}
	return out
}

func (r *Reconciler) deletingSets(ctx context.Context, _ client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, s := range r.listSets(ctx) {
		if s.DeletionTimestamp != nil {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&s)})
		}
	}
	return out
}

func (r *Reconciler) ownerOfClass(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[names.OwnerKindLabel] != names.KindNodeSet || l[names.OwnerNamespaceLabel] != r.Namespace {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: r.Namespace, Name: l[names.OwnerNameLabel]}}}
}

// NodePlacementChanged passes Node events that can change which sets select a node: creation, deletion,
// label, taint and Ready changes. Heartbeats and image lists are ignored.
func NodePlacementChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*corev1.Node)
			n, okN := e.ObjectNew.(*corev1.Node)
			if !okO || !okN {
				return true
			}
			return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
				!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
				readyStatus(o) != readyStatus(n) ||
				o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
	}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func ownerRefsChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
		},
	}
}

func deletesOnly() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// SpecOrDeletionChanged passes creations, deletions, and updates that change the spec (generation),
// annotations or the deletion timestamp: not status writes, which other controllers make often.
func SpecOrDeletionChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				!equality.Semantic.DeepEqual(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()) ||
				e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
	}
}
