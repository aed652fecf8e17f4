package lvmcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
//
// With names.KeepStorageOnDeleteAnnotation the teardown keeps the storage instead (keepStorage).
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if s.refusedBy == "" && names.KeepStorage(c.Annotations) {
		if done, err := r.keepStorage(ctx, s); !done || err != nil {
			return ctrl.Result{}, err
		}
	} else if s.refusedBy == "" {
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

// keepStorage is the teardown of an LVMCluster marked with names.KeepStorageOnDeleteAnnotation: nothing on
// the nodes is asked to go. It waits until the cluster manages no node (on a node it still manages, the agent
// would drop the device classes from lvmd.yaml and volumes there would stop being served), leaves the
// StorageClasses and VolumeSnapshotClasses in place (an LVMNodeSet migrated from the cluster adopts them),
// does not wait for volumes, and disowns each LVMVolumeGroup before deleting it: a node agent acts only on
// LVMVolumeGroups its managed LVMCluster controls, so none reads the deletion as "remove the volume group".
// It reports done once the LVMVolumeGroups and node statuses are gone.
func (r *Reconciler) keepStorage(ctx context.Context, s *scope) (bool, error) {
	c := s.cluster
	if len(s.assignment.Managed) > 0 {
		s.deletionBlockers = fmt.Sprintf("the LVMCluster is marked %s=true, so its teardown keeps the storage, and it still manages %s: hand %s over to an LVMNodeSet (lvms migrate apply), or remove the annotation to tear the storage down",
			names.KeepStorageOnDeleteAnnotation, "node(s) "+strings.Join(s.assignment.Managed, ", "), map[bool]string{true: "it", false: "them"}[len(s.assignment.Managed) == 1])
		return false, nil
	}
	var vgs lvmv1.LVMVolumeGroupList
	if err := r.Client.List(ctx, &vgs, client.InNamespace(c.Namespace)); err != nil {
		return false, fmt.Errorf("list LVMVolumeGroups: %w", err)
	}
	var waiting []string
	for i := range vgs.Items {
		vg := &vgs.Items[i]
		if controlledBy(vg, c) {
			base := vg.DeepCopy()
			vg.OwnerReferences = slices.DeleteFunc(vg.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == c.UID })
			if err := r.Client.Patch(ctx, vg, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
				s.deletionBlockers = fmt.Sprintf("releasing LVMVolumeGroup %s failed: %v", vg.Name, err)
				return false, err
			}
			waiting = append(waiting, "device class "+vg.Name+": releasing the LVMVolumeGroup")
			continue
		}
		if metav1.GetControllerOf(vg) != nil || !labelledFor(vg, c) {
			continue
		}
		msg, err := r.deleteVolumeGroup(ctx, vg)
		if err != nil {
			s.deletionBlockers = err.Error()
			return false, err
		}
		if msg != "" {
			waiting = append(waiting, msg)
		}
	}
	if len(waiting) > 0 {
		s.deletionBlockers = listSome(waiting)
		return false, nil
	}
	for _, st := range s.inv.NodeStatuses {
		if !controlledBy(st, c) {
			continue
		}
		if err := r.Client.Delete(ctx, st); client.IgnoreNotFound(err) != nil {
			s.deletionBlockers = fmt.Sprintf("deleting LVMVolumeGroupNodeStatus %s failed: %v", st.Name, err)
			return false, err
		}
	}
	return true, nil
}

// labelledFor reports whether o carries c's ownership labels (what is left of its ownership once disowned).
func labelledFor(o metav1.Object, c *lvmv1.LVMCluster) bool {
	for k, v := range labels(c) {
		if o.GetLabels()[k] != v {
			return false
		}
	}
	return true
}
