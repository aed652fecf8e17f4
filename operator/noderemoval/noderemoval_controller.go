package noderemoval

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/agent"
	"github.com/lvms-dev/lvms/operator/finalizers"
)

// Reconciler removes the per-node objects of deleted Nodes in one namespace. Its reconcile key is
// Namespace/<node name>.
type Reconciler struct {
	Client    client.Client
	Namespace string
}

// SetupWithManager registers the controller: Nodes, LVMNodes and node statuses map to their node's key, so
// leftovers are also found when the operator was down while a Node was deleted.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: r.Namespace, Name: o.GetName()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("noderemoval").
		Watches(&corev1.Node{}, byName).
		Watches(&lvmv2.LVMNode{}, byName).
		Watches(&lvmv1.LVMVolumeGroupNodeStatus{}, byName).
		Watches(&lvmv1.LVMVolumeGroup{}, handler.EnqueueRequestsFromMapFunc(r.finalizerNodes)).
		Complete(r)
}

// finalizerNodes maps an LVMVolumeGroup to the nodes its per-node finalizers name, so that a finalizer of a
// node deleted while the operator was down is found too.
func (r *Reconciler) finalizerNodes(_ context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, f := range o.GetFinalizers() {
		if i := strings.LastIndex(f, "/"); i >= 0 && i < len(f)-1 {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: r.Namespace, Name: f[i+1:]}})
		}
	}
	return out
}

// Reconcile cleans up after the node named by req if its Node object is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var node corev1.Node
	err := r.Client.Get(ctx, client.ObjectKey{Name: req.Name}, &node)
	if err == nil {
		return ctrl.Result{}, nil
	}
	if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get Node %s: %w", req.Name, err)
	}
	return ctrl.Result{}, r.cleanUp(ctx, req.Name)
}

func (r *Reconciler) cleanUp(ctx context.Context, node string) error {
	log := ctrl.LoggerFrom(ctx).WithValues("node", node)
	var errs []error
	key := client.ObjectKey{Namespace: r.Namespace, Name: node}
	for _, obj := range []client.Object{&lvmv2.LVMNode{}, &lvmv1.LVMVolumeGroupNodeStatus{}} {
		if err := r.Client.Get(ctx, key, obj); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("get %T %s: %w", obj, node, err))
			}
			continue
		}
		if obj.GetDeletionTimestamp() == nil {
			if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete %T %s: %w", obj, node, err))
				continue
			}
			log.Info("Deleted the object of a deleted Node", "kind", fmt.Sprintf("%T", obj))
			// The deletion set its deletion timestamp, and so a new resourceVersion: removing the finalizers
			// with the one read above would conflict, every time, and wait for the next pass.
			if err := r.Client.Get(ctx, key, obj); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("get %T %s: %w", obj, node, err))
				}
				continue // gone: it had no finalizers
			}
		}
		if removed, err := finalizers.RemoveAll(ctx, r.Client, obj); err != nil {
			errs = append(errs, err)
		} else if removed {
			log.Info("Removed finalizers of a deleted Node's object", "kind", fmt.Sprintf("%T", obj))
		}
	}
	var vgs lvmv1.LVMVolumeGroupList
	if err := r.Client.List(ctx, &vgs, client.InNamespace(r.Namespace)); err != nil {
		errs = append(errs, fmt.Errorf("list LVMVolumeGroups: %w", err))
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list Nodes: %w", err))...)
	}
	for i := range vgs.Items {
		vg := &vgs.Items[i]
		for _, f := range vg.Finalizers {
			if !IsNodeFinalizer(f, node) || ownedByExistingNode(f, nodes.Items) {
				continue
			}
			if _, err := finalizers.Remove(ctx, r.Client, vg, f); err != nil {
				errs = append(errs, err)
			} else {
				log.Info("Removed a deleted Node's finalizer", "lvmVolumeGroup", vg.Name, "finalizer", f)
			}
		}
	}
	return errors.Join(errs...)
}

// IsNodeFinalizer reports whether finalizer f belongs to node: it is the node agent's per-node finalizer
// (names too long for a finalizer are shortened the agent's way), or its name part (after the last "/")
// is the node's name.
func IsNodeFinalizer(f, node string) bool {
	if f == agent.VolumeGroupFinalizer(node) {
		return true
	}
	i := strings.LastIndex(f, "/")
	return i >= 0 && f[i+1:] == node
}

// ownedByExistingNode reports whether f is the finalizer of a node that exists (a shortened long node name
// can look like another name; a live node's finalizer is never removed).
func ownedByExistingNode(f string, nodes []corev1.Node) bool {
	for i := range nodes {
		if IsNodeFinalizer(f, nodes[i].Name) {
			return true
		}
	}
	return false
}
