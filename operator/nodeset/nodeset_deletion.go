package nodeset

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lvms-dev/lvms/operator/classes"
	"github.com/lvms-dev/lvms/operator/finalizers"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/usage"
)

// reconcileDelete tears a set down in a safe order: wait for every PVC/PV using its StorageClasses, delete
// the classes (no new volumes), withdraw from every LVMNode and wait for the node agents, then let go.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	set := classes.ForNodeSet(s.set, r.Names)
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
	var errs []error
	var waiting []string
	for _, name := range sortedKeys(s.inv.LVMNodes) {
		n := s.inv.LVMNodes[name]
		if !ownedBy(n, s.set) {
			continue
		}
		msg, err := r.withdraw(ctx, s, n)
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
