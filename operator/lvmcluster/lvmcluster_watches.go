package lvmcluster

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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
	"github.com/lvms-dev/lvms/operator/nodeset"
)

// SetupWithManager registers the controller. Changes that move nodes between the APIs (Nodes, LVMNodeSets,
// LVMNodes) or that the status reads (node statuses, volume groups, driver objects, classes) reconcile
// every LVMCluster of the namespace: there is normally one, and a refused one must learn when it is next.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(r.allClusters)
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Admission != nil {
		b = b.WatchesRawSource(source.Channel(r.Admission.Subscribe(), all))
	}
	return b.
		Named("lvmcluster").
		For(&lvmv1.LVMCluster{}).
		Watches(&lvmv1.LVMVolumeGroup{}, all).
		Watches(&lvmv1.LVMVolumeGroupNodeStatus{}, all).
		Watches(&lvmv2.LVMNodeSet{}, all, builder.WithPredicates(nodeset.SpecOrDeletionChanged())).
		Watches(&lvmv2.LVMNode{}, all, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return len(e.ObjectOld.GetOwnerReferences()) != len(e.ObjectNew.GetOwnerReferences())
			},
		})).
		Watches(&corev1.Node{}, all, builder.WithPredicates(nodeset.NodePlacementChanged())).
		Watches(&storagev1.StorageClass{}, all).
		Watches(&storagev1.CSIDriver{}, all).
		Watches(&appsv1.DaemonSet{}, all, builder.WithPredicates(nodeset.SpecOrDeletionChanged())).
		Watches(&corev1.PersistentVolumeClaim{}, all, builder.WithPredicates(deletesOnly())).
		Watches(&corev1.PersistentVolume{}, all, builder.WithPredicates(deletesOnly())).
		Complete(r)
}

func (r *Reconciler) allClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	var list lvmv1.LVMClusterList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list LVMClusters for a watch event")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

func deletesOnly() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
