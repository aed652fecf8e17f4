package provisioner

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// nodeReconciler handles nodes that go away. A Node deleted while it carries TopoLVM's node finalizer
// (topolvm.io/node, left on nodes by topolvm-node before an upgrade) is cleaned up as TopoLVM does: its
// LogicalVolumes are marked pending deletion, released and deleted (the LVs went with the node), then the
// finalizer is removed so the Node can go.
//
// Any other node that is lost — its Node object deleted, or NotReady — for longer than the grace period has
// the LogicalVolumes whose deletion was asked for (a released PV with reclaim policy Delete, a deleted
// snapshot) released: no agent will remove their LVs, and without this the PV, and so the claim's
// namespace, never goes. Volumes still in use or kept (Retain) are never touched; their claims get a
// warning saying what to do. A node that comes back (Ready again, or registered again under the same
// name) within the grace period gets everything back as it was.
type nodeReconciler struct{ *Provisioner }

// nodeLostSince is the LogicalVolume annotation recording when the operator first saw its node lost (its
// Node object missing or not Ready); it goes when the node is back.
const nodeLostSince = "lvm.topolvm.io/node-lost-since"

func (r *nodeReconciler) setup(mgr ctrl.Manager) error {
	// LogicalVolumes map to their node, so a deletion asked for after the node went, and nodes deleted
	// while the operator was down, are looked at too.
	byNode := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		lv, ok := o.(*topolvmv1.LogicalVolume)
		if !ok || lv.Spec.NodeName == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: lv.Spec.NodeName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named(r.named("node")).For(&corev1.Node{}).
		Watches(&topolvmv1.LogicalVolume{}, byNode).Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *nodeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	err := r.client.Get(ctx, req.NamespacedName, node)
	switch {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get node %s: %w", req.Name, err)
	case !node.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(node, r.opts.Names.NodeFinalizer()):
		return ctrl.Result{}, r.releaseTopoLVMNode(ctx, node)
	}
	return r.lostNode(ctx, req.Name, node)
}

// releaseTopoLVMNode is TopoLVM's cleanup of a deleted Node that carries its finalizer.
func (r *nodeReconciler) releaseTopoLVMNode(ctx context.Context, node *corev1.Node) error {
	if err := r.releaseVolumes(ctx, node.Name); err != nil {
		return err
	}
	base := node.DeepCopy()
	controllerutil.RemoveFinalizer(node, r.opts.Names.NodeFinalizer())
	if err := r.client.Patch(ctx, node, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("remove finalizer %s from node %s: %w", r.opts.Names.NodeFinalizer(), node.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Released the LogicalVolumes of a deleted node", "node", node.Name)
	return nil
}

// lostNode releases the volumes whose deletion was asked for on a node lost for longer than the grace
// period; node is nil when the Node object does not exist.
func (r *nodeReconciler) lostNode(ctx context.Context, name string, node *corev1.Node) (ctrl.Result, error) {
	lvs, err := r.volumesOn(ctx, name)
	if err != nil {
		return ctrl.Result{}, err
	}
	since, lost := notReadySince(node)
	if len(lvs) == 0 {
		if node == nil {
			return ctrl.Result{}, r.warnClaims(ctx, name)
		}
		return ctrl.Result{}, nil
	}
	if !lost {
		// Ready, or registered again: forget it was lost.
		return ctrl.Result{}, r.unstamp(ctx, lvs)
	}
	now := r.opts.Clock.Now()
	first, err := r.stampLost(ctx, lvs, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if node == nil || first.Before(since) {
		since = first
	}
	releaseAt := since.Add(r.opts.NodeLostGracePeriod)
	asked := deletionsAskedFor(lvs, r.opts.Names.LogicalVolumeFinalizer())
	if wait := releaseAt.Sub(now); wait > 0 {
		for _, lv := range asked {
			r.events.Eventf(lv, nil, corev1.EventTypeWarning, "NodeLost", "Wait",
				"Node %q is lost (since %s): this volume's deletion completes without its node agent at %s unless the node comes back",
				name, since.UTC().Format(time.RFC3339), releaseAt.UTC().Format(time.RFC3339))
		}
		if node == nil && first.Equal(now) {
			// Tell the claims when the loss is first seen.
			if err := r.warnClaims(ctx, name); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	pvs, err := r.pvsByHandle(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	for _, lv := range asked {
		if err := r.release(ctx, lv); err != nil {
			errs = append(errs, err)
			continue
		}
		msg := fmt.Sprintf("Node %q has been lost since %s (grace period %s): released this volume without its node agent; its data is considered lost",
			name, since.UTC().Format(time.RFC3339), r.opts.NodeLostGracePeriod)
		r.events.Eventf(lv, nil, corev1.EventTypeWarning, "NodeLost", "Release", "%s", msg)
		if pv, ok := pvs[lv.Status.VolumeID]; ok {
			r.events.Eventf(pv, nil, corev1.EventTypeWarning, "NodeLost", "Release", "%s", msg)
		}
	}
	// Kept volumes: say what to do, on the PV and the LogicalVolume.
	for _, lv := range lvs {
		pv, ok := pvs[lv.Status.VolumeID]
		if !ok || !lv.DeletionTimestamp.IsZero() || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
			continue
		}
		msg := fmt.Sprintf("Node %q has been lost since %s: this volume is kept (reclaim policy Retain); its data is on that node. Delete the PersistentVolume and the LogicalVolume %s once you no longer need them",
			name, since.UTC().Format(time.RFC3339), lv.Name)
		r.events.Eventf(pv, nil, corev1.EventTypeWarning, "NodeLost", "Keep", "%s", msg)
		r.events.Eventf(lv, nil, corev1.EventTypeWarning, "NodeLost", "Keep", "%s", msg)
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// pvsByHandle maps the driver's PVs by volume handle.
func (r *nodeReconciler) pvsByHandle(ctx context.Context) (map[string]*corev1.PersistentVolume, error) {
	list := &corev1.PersistentVolumeList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list PVs: %w", err)
	}
	out := map[string]*corev1.PersistentVolume{}
	for i := range list.Items {
		if pv := &list.Items[i]; pv.Spec.CSI != nil && pv.Spec.CSI.Driver == r.driver() {
			out[pv.Spec.CSI.VolumeHandle] = pv
		}
	}
	return out, nil
}

// deletionsAskedFor are the LogicalVolumes someone deleted (the deleter for a released PV with reclaim
// policy Delete, the snapshotter for a deleted snapshot) that still wait for their agent: volumes in use
// or kept are never among them.
func deletionsAskedFor(lvs []*topolvmv1.LogicalVolume, finalizer string) []*topolvmv1.LogicalVolume {
	var out []*topolvmv1.LogicalVolume
	for _, lv := range lvs {
		if !lv.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(lv, finalizer) {
			out = append(out, lv)
		}
	}
	return out
}

// notReadySince says whether a node is lost (missing, or not Ready) and, for an existing one, since when.
func notReadySince(node *corev1.Node) (time.Time, bool) {
	if node == nil {
		return time.Time{}, true
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastTransitionTime.Time, c.Status != corev1.ConditionTrue
		}
	}
	return time.Time{}, false // no kubelet ever reported on it: nothing to judge by (test and sandbox nodes)
}

func (r *nodeReconciler) volumesOn(ctx context.Context, node string) ([]*topolvmv1.LogicalVolume, error) {
	list := &topolvmv1.LogicalVolumeList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list LogicalVolumes: %w", err)
	}
	var out []*topolvmv1.LogicalVolume
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == node {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// stampLost records on the node's LogicalVolumes when the operator first saw the node lost, and returns the
// earliest record (a restart of the operator does not restart the grace period).
func (r *nodeReconciler) stampLost(ctx context.Context, lvs []*topolvmv1.LogicalVolume, now time.Time) (time.Time, error) {
	since := now
	for _, lv := range lvs {
		if t, err := time.Parse(time.RFC3339, lv.Annotations[nodeLostSince]); err == nil && t.Before(since) {
			since = t
		}
	}
	for _, lv := range lvs {
		if _, ok := lv.Annotations[nodeLostSince]; ok {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, nodeLostSince, since.UTC().Format(time.RFC3339))
		if err := r.client.Patch(ctx, lv, client.RawPatch(types.MergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
			return since, fmt.Errorf("record the lost node on LogicalVolume %s: %w", lv.Name, err)
		}
	}
	return since, nil
}

func (r *nodeReconciler) unstamp(ctx context.Context, lvs []*topolvmv1.LogicalVolume) error {
	for _, lv := range lvs {
		if _, ok := lv.Annotations[nodeLostSince]; !ok {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, nodeLostSince)
		if err := r.client.Patch(ctx, lv, client.RawPatch(types.MergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("clear the lost-node record on LogicalVolume %s: %w", lv.Name, err)
		}
	}
	return nil
}

// release marks a LogicalVolume pending deletion and removes its finalizer, which its agent would have
// removed after removing the LV.
func (r *nodeReconciler) release(ctx context.Context, lv *topolvmv1.LogicalVolume) error {
	base := lv.DeepCopy()
	if lv.Annotations == nil {
		lv.Annotations = map[string]string{}
	}
	lv.Annotations[r.opts.Names.PendingDeletion()] = "true"
	controllerutil.RemoveFinalizer(lv, r.opts.Names.LogicalVolumeFinalizer())
	if err := r.client.Patch(ctx, lv, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("release LogicalVolume %s: %w", lv.Name, err)
	}
	return nil
}

// releaseVolumes deletes the node's LogicalVolumes without waiting for a node agent that will not come.
func (r *nodeReconciler) releaseVolumes(ctx context.Context, node string) error {
	list := &topolvmv1.LogicalVolumeList{}
	if err := r.client.List(ctx, list); err != nil {
		return fmt.Errorf("list LogicalVolumes: %w", err)
	}
	var errs []error
	for i := range list.Items {
		lv := &list.Items[i]
		if lv.Spec.NodeName != node {
			continue
		}
		if err := r.release(ctx, lv); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.client.Delete(ctx, lv); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete LogicalVolume %s: %w", lv.Name, err))
		}
	}
	return errors.Join(errs...)
}

// warnClaims puts a warning on every PVC bound to a volume of a node that is gone.
func (r *nodeReconciler) warnClaims(ctx context.Context, node string) error {
	pvs := &corev1.PersistentVolumeList{}
	if err := r.client.List(ctx, pvs); err != nil {
		return fmt.Errorf("list PVs: %w", err)
	}
	for _, pv := range pvs.Items {
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.driver() || pv.Spec.ClaimRef == nil || pvNode(&pv, r.opts.Names.TopologyKey()) != node {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: pv.Spec.ClaimRef.Namespace, Name: pv.Spec.ClaimRef.Name}, pvc); err != nil {
			continue
		}
		r.warn(pvc, "NodeGone", "Provision", "Node %q, where volume %s lives, no longer exists: its data went with the node. Delete this claim (and recreate it) to get a new volume on another node; with reclaim policy %s the volume is %s",
			node, pv.Name, pv.Spec.PersistentVolumeReclaimPolicy, keptOrReleased(pv.Spec.PersistentVolumeReclaimPolicy, r.opts.NodeLostGracePeriod))
	}
	return nil
}

func (r *nodeReconciler) warn(pvc *corev1.PersistentVolumeClaim, reason, action, format string, args ...any) {
	r.events.Eventf(pvc, nil, corev1.EventTypeWarning, reason, action, format, args...)
}

func keptOrReleased(p corev1.PersistentVolumeReclaimPolicy, grace time.Duration) string {
	if p == corev1.PersistentVolumeReclaimDelete {
		return fmt.Sprintf("released %s after the node was lost unless the node comes back", grace)
	}
	return "kept: delete the PersistentVolume and its LogicalVolume yourself once you no longer need them"
}

// pvNode is the node a PV's node affinity pins it to.
func pvNode(pv *corev1.PersistentVolume, key string) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == key && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}
