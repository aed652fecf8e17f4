package consoletest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// Apply writes objs into a real API server the way the operator and node agents would: each object is
// created, then its status is written through the status subresource. Owner references without a UID get
// the UID of the object created earlier with that kind and name. Objects of kinds the server does not serve
// (VolumeSnapshotClass without the snapshot CRDs) are skipped.
func Apply(ctx context.Context, c client.Client, objs []client.Object) error {
	uids := map[string]string{}
	for _, o := range objs {
		created := o.DeepCopyObject().(client.Object)
		created.SetResourceVersion("")
		refs := created.GetOwnerReferences()
		for i := range refs {
			if refs[i].UID == "" {
				refs[i].UID = types.UID(uids[refs[i].Kind+"/"+refs[i].Name])
			}
		}
		created.SetOwnerReferences(refs)
		if err := c.Create(ctx, created); err != nil {
			if _, ok := o.(*unstructured.Unstructured); ok && meta.IsNoMatchError(err) {
				continue
			}
			return fmt.Errorf("create %T %s: %w", o, client.ObjectKeyFromObject(o), err)
		}
		gvk, err := c.GroupVersionKindFor(created)
		if err != nil {
			return fmt.Errorf("kind of %T: %w", o, err)
		}
		uids[gvk.Kind+"/"+created.GetName()] = string(created.GetUID())
		if !copyStatus(o, created) {
			continue
		}
		if err := c.Status().Update(ctx, created); err != nil {
			return fmt.Errorf("write status of %T %s: %w", o, client.ObjectKeyFromObject(o), err)
		}
	}
	return nil
}

// copyStatus copies the status of from into to (the same kind) and reports whether the kind has one.
func copyStatus(from, to client.Object) bool {
	switch f := from.(type) {
	case *lvmv2.LVMNodeSet:
		to.(*lvmv2.LVMNodeSet).Status = f.Status
	case *lvmv2.LVMNode:
		to.(*lvmv2.LVMNode).Status = f.Status
	case *lvmv1.LVMCluster:
		to.(*lvmv1.LVMCluster).Status = f.Status
	case *lvmv1.LVMVolumeGroupNodeStatus:
		to.(*lvmv1.LVMVolumeGroupNodeStatus).Status = f.Status
	case *topolvmv1.LogicalVolume:
		to.(*topolvmv1.LogicalVolume).Status = f.Status
	case *corev1.PersistentVolume:
		to.(*corev1.PersistentVolume).Status = f.Status
	case *corev1.PersistentVolumeClaim:
		to.(*corev1.PersistentVolumeClaim).Status = f.Status
	default:
		return false
	}
	return true
}
