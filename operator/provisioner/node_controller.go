package provisioner

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// nodeReconciler handles nodes that go away. A Node deleted while it carries TopoLVM's node finalizer
// (topolvm.io/node, left on nodes by topolvm-node before an upgrade) is cleaned up as TopoLVM does: its
// LogicalVolumes are marked pending deletion, released and deleted (the LVs went with the node), then the
// finalizer is removed so the Node can go. For every node that is gone, each PVC whose volume lived there
// gets a warning event saying what to do.
type nodeReconciler struct{ *Provisioner }

func (r *nodeReconciler) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("provisioner-node").For(&corev1.Node{}).Complete(r)
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;update;patch

// Reconcile implements reconcile.Reconciler.
func (r *nodeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	err := r.client.Get(ctx, req.NamespacedName, node)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.warnClaims(ctx, req.Name)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get node %s: %w", req.Name, err)
	case node.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(node, r.opts.Names.NodeFinalizer()):
		return ctrl.Result{}, nil
	}
	if err := r.releaseVolumes(ctx, node.Name); err != nil {
		return ctrl.Result{}, err
	}
	base := node.DeepCopy()
	controllerutil.RemoveFinalizer(node, r.opts.Names.NodeFinalizer())
	if err := r.client.Patch(ctx, node, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer %s from node %s: %w", r.opts.Names.NodeFinalizer(), node.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Released the LogicalVolumes of a deleted node", "node", node.Name)
	return ctrl.Result{}, nil
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
		base := lv.DeepCopy()
		if lv.Annotations == nil {
			lv.Annotations = map[string]string{}
		}
		lv.Annotations[r.opts.Names.PendingDeletion()] = "true"
		controllerutil.RemoveFinalizer(lv, r.opts.Names.LogicalVolumeFinalizer())
		if err := r.client.Patch(ctx, lv, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("release LogicalVolume %s: %w", lv.Name, err))
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
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.opts.Names.Driver() || pv.Spec.ClaimRef == nil || pvNode(&pv, r.opts.Names.TopologyKey()) != node {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: pv.Spec.ClaimRef.Namespace, Name: pv.Spec.ClaimRef.Name}, pvc); err != nil {
			continue
		}
		r.warn(pvc, "NodeGone", "Provision", "Node %q, where volume %s lives, no longer exists: its data went with the node. Delete this claim (and recreate it) to get a new volume on another node", node, pv.Name)
	}
	return nil
}

func (r *nodeReconciler) warn(pvc *corev1.PersistentVolumeClaim, reason, action, format string, args ...any) {
	r.events.Eventf(pvc, nil, corev1.EventTypeWarning, reason, action, format, args...)
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
