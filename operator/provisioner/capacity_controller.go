package provisioner

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// managedByLabel marks the CSIStorageCapacity objects the publisher owns.
const managedByLabel = "app.kubernetes.io/managed-by"

// capacityReconciler publishes one CSIStorageCapacity per node and StorageClass of the driver, from the
// node's capacity annotation for the class's device class.
type capacityReconciler struct{ *Provisioner }

func (r *capacityReconciler) setup(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "capacity"}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).Named(r.named("capacity"))
	if r.opts.Shared {
		// A shared volume group's free space and lockspace members are in the LVMNodes' status.
		b = b.Watches(&lvmv2.LVMNode{}, all)
	}
	return b.Watches(&corev1.Node{}, all, builder.WithPredicates(nodeCapacityChanged())).
		Watches(&storagev1.StorageClass{}, all).
		Watches(&storagev1.CSIStorageCapacity{}, all).
		Complete(r)
}

// nodeCapacityChanged passes Node events that can change the objects: creation, deletion, labels (the
// topology key, the hostname), annotations (the capacity) and the deletion timestamp. Not status
// heartbeats, which every node sends.
func nodeCapacityChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return !maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
				!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
		},
	}
}

// +kubebuilder:rbac:groups=storage.k8s.io,resources=csistoragecapacities,verbs=get;list;watch;create;update;patch;delete

func (r *capacityReconciler) managedBy() string {
	return "lvms-" + strings.ReplaceAll(r.driver(), ".", "-")
}

// Reconcile implements reconcile.Reconciler: it recomputes every object.
func (r *capacityReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	classes := &storagev1.StorageClassList{}
	if err := r.client.List(ctx, classes); err != nil {
		return ctrl.Result{}, fmt.Errorf("list StorageClasses: %w", err)
	}
	classes.Items = slices.DeleteFunc(classes.Items, func(sc storagev1.StorageClass) bool { return sc.Provisioner != r.driver() })
	existing, err := r.existing(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := map[string]*storagev1.CSIStorageCapacity{}
	if r.opts.Shared {
		for i := range classes.Items {
			obj, err := r.sharedCapacity(ctx, &classes.Items[i])
			if err != nil {
				return ctrl.Result{}, err
			}
			if obj != nil {
				want[capacityKey(obj)] = obj
			}
		}
		return ctrl.Result{}, r.publish(ctx, want, existing)
	}
	if len(classes.Items) == 0 {
		return ctrl.Result{}, r.publish(ctx, want, existing) // no Node to read
	}
	// Read only: the cache's own objects, not a copy of every Node on every Node event (the copies were a
	// third of the operator's CPU while 5,000 nodes joined).
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list nodes: %w", err)
	}
	for _, sc := range classes.Items {
		for i := range nodes.Items {
			n := &nodes.Items[i]
			value, ok := n.Labels[r.opts.Names.TopologyKey()]
			if !ok || !n.DeletionTimestamp.IsZero() {
				continue
			}
			c := max(capacityOf(n, r.opts.Names, sc.Parameters[r.opts.Names.DeviceClassParam()]), 0)
			obj := &storagev1.CSIStorageCapacity{
				ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.CapacityNamespace, Name: capacityName(sc.Name, n.Name),
					Labels: map[string]string{managedByLabel: r.managedBy()}},
				StorageClassName: sc.Name,
				NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{r.opts.Names.TopologyKey(): value}},
				Capacity:         resource.NewQuantity(c, resource.BinarySI),
			}
			want[capacityKey(obj)] = obj
		}
	}
	return ctrl.Result{}, r.publish(ctx, want, existing)
}

// existing lists the objects of the namespace publish looks at: ours, and those TopoLVM's
// external-provisioner left for this driver. The other driver's (the shared and the node-local publishers
// share the namespace) are not read.
func (r *capacityReconciler) existing(ctx context.Context) ([]storagev1.CSIStorageCapacity, error) {
	var out []storagev1.CSIStorageCapacity
	seen := map[types.UID]bool{}
	for _, labels := range []client.MatchingLabels{{managedByLabel: r.managedBy()}, {externalProvisionerDriver: r.driver()}} {
		list := &storagev1.CSIStorageCapacityList{}
		if err := r.client.List(ctx, list, client.InNamespace(r.opts.CapacityNamespace), labels); err != nil {
			return nil, fmt.Errorf("list CSIStorageCapacities: %w", err)
		}
		for _, c := range list.Items {
			if !seen[c.UID] {
				seen[c.UID] = true
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// publish makes the objects of the namespace match want, matched by StorageClass and topology so that an
// object keeps its name and UID: what no longer fits is deleted first (a nodeTopology cannot change in
// place), then each wanted object is updated, adopted from TopoLVM's external-provisioner or created.
func (r *capacityReconciler) publish(ctx context.Context, want map[string]*storagev1.CSIStorageCapacity, existing []storagev1.CSIStorageCapacity) error {
	byKey := map[string]*storagev1.CSIStorageCapacity{}
	ours := map[string]*storagev1.CSIStorageCapacity{}
	var stale []*storagev1.CSIStorageCapacity
	for i := range existing {
		cur := &existing[i]
		key := capacityKey(cur)
		switch {
		case cur.Labels[managedByLabel] == r.managedBy():
			if _, ok := want[key]; !ok || ours[key] != nil {
				stale = append(stale, cur) // not wanted, or a second object for one class and topology
				continue
			}
			ours[key] = cur
		case r.leftByExternalProvisioner(cur) && byKey[key] == nil:
			byKey[key] = cur
		}
	}
	maps.Copy(byKey, ours) // our own object first, TopoLVM's only where we have none
	for _, cur := range stale {
		if err := r.client.Delete(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete CSIStorageCapacity %s: %w", cur.Name, err)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(want)) {
		obj := want[key]
		cur := byKey[key]
		if cur == nil {
			if err := r.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create CSIStorageCapacity %s: %w", obj.Name, err)
			}
			continue
		}
		adopt := cur.Labels[managedByLabel] != r.managedBy()
		if !adopt && cur.Capacity != nil && cur.Capacity.Cmp(*obj.Capacity) == 0 {
			continue
		}
		base := cur.DeepCopy()
		cur.Capacity = obj.Capacity
		if adopt {
			// TopoLVM's object, kept under its name; no longer owned by TopoLVM's Deployment, whose removal
			// would otherwise garbage-collect it.
			cur.Labels = maps.Clone(cur.Labels)
			cur.Labels[managedByLabel] = r.managedBy()
			delete(cur.Labels, externalProvisionerManagedBy)
			cur.OwnerReferences = nil
		}
		if err := r.client.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("update CSIStorageCapacity %s: %w", cur.Name, err)
		}
	}
	return nil
}

// Labels external-provisioner puts on the CSIStorageCapacity objects it publishes (TopoLVM's, before LVMS).
const (
	externalProvisionerDriver    = "csi.storage.k8s.io/drivername"
	externalProvisionerManagedBy = "csi.storage.k8s.io/managed-by"
)

// leftByExternalProvisioner tells TopoLVM's objects for this driver, which LVMS takes over in place.
func (r *capacityReconciler) leftByExternalProvisioner(c *storagev1.CSIStorageCapacity) bool {
	return c.Labels[externalProvisionerDriver] == r.driver() && strings.HasPrefix(c.Labels[externalProvisionerManagedBy], "external-provisioner")
}

// capacityKey is what one object is for: its StorageClass and its topology.
func capacityKey(c *storagev1.CSIStorageCapacity) string {
	return c.StorageClassName + "\x00" + metav1.FormatLabelSelector(c.NodeTopology)
}

// sharedCapacity is one object per StorageClass of a shared volume group: its free space, on the nodes in
// its lockspace (by hostname: the shared driver has no topology key of its own). Nil before any node joined.
func (r *capacityReconciler) sharedCapacity(ctx context.Context, sc *storagev1.StorageClass) (*storagev1.CSIStorageCapacity, error) {
	if r.opts.SharedCapacity == nil {
		return nil, nil
	}
	free, joined, err := r.opts.SharedCapacity(ctx, sc.Parameters[r.opts.Names.DeviceClassParam()])
	if status.Code(err) == codes.InvalidArgument {
		ctrl.LoggerFrom(ctx).Info("No capacity for a shared StorageClass", "storageClass", sc.Name, "reason", status.Convert(err).Message())
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var hostnames []string
	var n corev1.Node
	for _, name := range slices.Compact(slices.Sorted(slices.Values(joined))) {
		// The joined nodes only, not every Node: this runs on every LVMNode event.
		switch err := r.client.Get(ctx, types.NamespacedName{Name: name}, &n, client.UnsafeDisableDeepCopy); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get Node %s: %w", name, err)
		case n.DeletionTimestamp.IsZero():
			hostnames = append(hostnames, cmp.Or(n.Labels[corev1.LabelHostname], n.Name))
		}
	}
	if len(hostnames) == 0 {
		return nil, nil
	}
	slices.Sort(hostnames)
	return &storagev1.CSIStorageCapacity{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.CapacityNamespace, Name: capacityName(sc.Name, ""),
			Labels: map[string]string{managedByLabel: r.managedBy()}},
		StorageClassName: sc.Name,
		NodeTopology: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: metav1.LabelSelectorOpIn, Values: hostnames}}},
		Capacity: resource.NewQuantity(free, resource.BinarySI),
	}, nil
}

// capacityName is a stable DNS-1123 name for a StorageClass and node.
func capacityName(sc, node string) string {
	sum := sha256.Sum256([]byte(sc + "\x00" + node))
	return "topolvm-" + hex.EncodeToString(sum[:8])
}
