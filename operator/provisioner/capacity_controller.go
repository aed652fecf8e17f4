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
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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
	return b.Watches(&corev1.Node{}, all).
		Watches(&storagev1.StorageClass{}, all).
		Watches(&storagev1.CSIStorageCapacity{}, all).
		Complete(r)
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
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("list nodes: %w", err)
	}
	existing := &storagev1.CSIStorageCapacityList{}
	if err := r.client.List(ctx, existing, client.InNamespace(r.opts.CapacityNamespace), client.MatchingLabels{managedByLabel: r.managedBy()}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list CSIStorageCapacities: %w", err)
	}
	want := map[string]*storagev1.CSIStorageCapacity{}
	for _, sc := range classes.Items {
		if sc.Provisioner != r.driver() {
			continue
		}
		if r.opts.Shared {
			obj, err := r.sharedCapacity(ctx, &sc, nodes.Items)
			if err != nil {
				return ctrl.Result{}, err
			}
			if obj != nil {
				want[obj.Name] = obj
			}
			continue
		}
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
			want[obj.Name] = obj
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if err := r.apply(ctx, want[name]); err != nil {
			return ctrl.Result{}, err
		}
	}
	for i := range existing.Items {
		if _, ok := want[existing.Items[i].Name]; !ok {
			if err := r.client.Delete(ctx, &existing.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("delete CSIStorageCapacity %s: %w", existing.Items[i].Name, err)
			}
		}
	}
	return ctrl.Result{}, nil
}

// sharedCapacity is one object per StorageClass of a shared volume group: its free space, on the nodes in
// its lockspace (by hostname: the shared driver has no topology key of its own). Nil before any node joined.
func (r *capacityReconciler) sharedCapacity(ctx context.Context, sc *storagev1.StorageClass, nodes []corev1.Node) (*storagev1.CSIStorageCapacity, error) {
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
	for _, n := range nodes {
		if slices.Contains(joined, n.Name) && n.DeletionTimestamp.IsZero() {
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

func (r *capacityReconciler) apply(ctx context.Context, obj *storagev1.CSIStorageCapacity) error {
	cur := &storagev1.CSIStorageCapacity{}
	err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), cur)
	if apierrors.IsNotFound(err) {
		if err := r.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CSIStorageCapacity %s: %w", obj.Name, err)
		}
		return nil
	} else if err != nil {
		return fmt.Errorf("get CSIStorageCapacity %s: %w", obj.Name, err)
	}
	if cur.Capacity != nil && cur.Capacity.Cmp(*obj.Capacity) == 0 && equality.Semantic.DeepEqual(cur.NodeTopology, obj.NodeTopology) {
		return nil
	}
	if !equality.Semantic.DeepEqual(cur.NodeTopology, obj.NodeTopology) {
		// nodeTopology is immutable: a shared volume group's lockspace gained or lost a node.
		if err := r.client.Delete(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("replace CSIStorageCapacity %s: %w", obj.Name, err)
		}
		if err := r.client.Create(ctx, obj); err != nil {
			return fmt.Errorf("replace CSIStorageCapacity %s: %w", obj.Name, err)
		}
		return nil
	}
	base := cur.DeepCopy()
	cur.Capacity = obj.Capacity
	if err := r.client.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("update CSIStorageCapacity %s: %w", obj.Name, err)
	}
	return nil
}

// capacityName is a stable DNS-1123 name for a StorageClass and node.
func capacityName(sc, node string) string {
	sum := sha256.Sum256([]byte(sc + "\x00" + node))
	return "topolvm-" + hex.EncodeToString(sum[:8])
}
