package nodeset

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/apply"
	"github.com/lvms-dev/lvms/operator/inventory"

	"github.com/lvms-dev/lvms/operator/classes"
	"github.com/lvms-dev/lvms/operator/finalizers"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/usage"
)

// reconcileDelete tears a set down in a safe order: wait for every PVC/PV using its StorageClasses, delete
// the classes (no new volumes), withdraw from every LVMNode and wait for the node agents, then let go.
//
// With names.KeepStorageOnDeleteAnnotation the set keeps the storage instead: it does not wait for volumes,
// leaves its classes in place (an LVMCluster the set was migrated from takes them back) and withdraws from
// each LVMNode with withdrawKeeping.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	set := classes.ForNodeSet(s.set, r.Names)
	keep := names.KeepStorage(s.set.Annotations)
	if !keep {
		blockers, err := usage.Blockers(ctx, r.Client, set, maxListed)
		if err != nil {
			return ctrl.Result{}, err
		}
		if blockers != "" {
			s.deletionBlockers = blockers
			return ctrl.Result{}, nil
		}
		if _, err := classes.Delete(ctx, r.Client, set.Owner); err != nil {
			s.deletionBlockers = fmt.Sprintf("deleting the set's storage classes failed: %v", err)
			return ctrl.Result{}, err
		}
	}
	var errs []error
	var waiting []string
	for _, name := range sortedKeys(s.inv.LVMNodes) {
		n := s.inv.LVMNodes[name]
		if !ownedBy(n, s.set) {
			continue
		}
		withdraw := r.withdraw
		if keep {
			withdraw = r.withdrawKeeping
		}
		msg, err := withdraw(ctx, s, n)
		if err != nil {
			errs = append(errs, err)
		}
		if msg != "" {
			s.withdrawing[name] = msg
			waiting = append(waiting, msg)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.deletionBlockers = fmt.Sprintf("removing the set from its nodes failed: %v", err)
		return ctrl.Result{}, err
	}
	if len(waiting) > 0 {
		s.deletionBlockers = fmt.Sprintf("waiting for %d node(s): %s", len(waiting), listSome(waiting, "; "))
		return ctrl.Result{}, nil
	}
	if _, err := finalizers.Remove(ctx, r.Client, s.set, names.NodeSetFinalizer); err != nil {
		s.deletionBlockers = err.Error()
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// withdrawKeeping removes the set from an LVMNode without any node agent reading it as "remove the volume
// groups": the agent removes a volume group only when the object naming it is deleted, so the set first
// takes its part out of the spec (the agent then keeps the volume group as it is, or serves it from the
// LVMCluster that names it too) and deletes the LVMNode, or drops its owner reference, only once the cache
// shows the spec no longer holds its part. It returns what that still waits for ("" when done).
func (r *Reconciler) withdrawKeeping(ctx context.Context, s *scope, n *lvmv2.LVMNode) (string, error) {
	owner := names.NodeSetFieldOwner(string(s.set.UID))
	if s.inv.Nodes[n.Name] == nil || n.DeletionTimestamp != nil {
		return r.withdraw(ctx, s, n) // no agent acts on it any more, or the deletion is under way already
	}
	if ownsSpec(n, owner) {
		u, err := r.desiredNode(s, n.Name, false)
		if err != nil {
			return "", err
		}
		if err := apply.Unstructured(ctx, r.Client, u, owner, false); err != nil {
			return "", err
		}
		return fmt.Sprintf("withdrawing the set's volume groups from LVMNode %s without removing them", n.Name), nil
	}
	others := slices.DeleteFunc(inventory.NodeSetOwners(n), func(o string) bool { return o == s.set.Name })
	if len(others) == 0 {
		uid := n.UID
		if err := r.Client.Delete(ctx, n, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("delete LVMNode %s: %w", n.Name, err)
		}
		if len(n.Finalizers) > 0 {
			return fmt.Sprintf("deleting LVMNode %s, which no longer names a volume group of the set: waiting for the node agent to let it go", n.Name), nil
		}
		return "", nil
	}
	empty := &unstructured.Unstructured{}
	empty.SetAPIVersion(lvmv2.GroupVersion.String())
	empty.SetKind("LVMNode")
	empty.SetName(n.Name)
	empty.SetNamespace(n.Namespace)
	return "", apply.Unstructured(ctx, r.Client, empty, owner, false)
}
