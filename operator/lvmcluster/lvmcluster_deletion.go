package lvmcluster

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/operator/classes"
	"github.com/lvms-dev/lvms/operator/finalizers"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/usage"
)

// reconcileDelete tears an LVMCluster down in LVMS's order: wait for every PVC/PV using its StorageClasses,
// delete the classes, delete the LVMVolumeGroups and wait for the node agents to remove the volume groups,
// delete the node statuses, then let go. A refused LVMCluster owns nothing and goes at once.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if s.refusedBy == "" {
		set := classes.ForCluster(c, r.Names)
		blockers, err := usage.Blockers(ctx, r.Client, set, maxListed)
		if err != nil {
			return ctrl.Result{}, err
		}
		if blockers != "" {
			s.deletionBlockers = blockers
			return ctrl.Result{}, nil
		}
		if _, err := classes.Delete(ctx, r.Client, set.Owner); err != nil {
			s.deletionBlockers = fmt.Sprintf("deleting the storage classes failed: %v", err)
			return ctrl.Result{}, err
		}
		var vgs lvmv1.LVMVolumeGroupList
		if err := r.Client.List(ctx, &vgs, client.InNamespace(c.Namespace)); err != nil {
			return ctrl.Result{}, fmt.Errorf("list LVMVolumeGroups: %w", err)
		}
		var waiting []string
		for i := range vgs.Items {
			vg := &vgs.Items[i]
			if !controlledBy(vg, c) {
				continue
			}
			msg, err := r.deleteVolumeGroup(ctx, vg)
			if err != nil {
				s.deletionBlockers = err.Error()
				return ctrl.Result{}, err
			}
			if msg != "" {
				waiting = append(waiting, msg)
			}
		}
		if len(waiting) > 0 {
			s.deletionBlockers = listSome(waiting)
			return ctrl.Result{}, nil
		}
		for _, st := range s.inv.NodeStatuses {
			if !controlledBy(st, c) {
				continue
			}
			if err := r.Client.Delete(ctx, st); client.IgnoreNotFound(err) != nil {
				s.deletionBlockers = fmt.Sprintf("deleting LVMVolumeGroupNodeStatus %s failed: %v", st.Name, err)
				return ctrl.Result{}, err
			}
		}
	}
	if _, err := finalizers.Remove(ctx, r.Client, c, names.ClusterFinalizer); err != nil {
		s.deletionBlockers = err.Error()
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}
