package provisioner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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
	return ctrl.NewControllerManagedBy(mgr).Named("provisioner-capacity").
		Watches(&corev1.Node{}, all).
		Watches(&storagev1.StorageClass{}, all).
		Watches(&storagev1.CSIStorageCapacity{}, all).
		Complete(r)
}

// +kubebuilder:rbac:groups=storage.k8s.io,resources=csistoragecapacities,verbs=get;list;watch;create;update;patch;delete

func (r *capacityReconciler) managedBy() string {
	return "lvms-" + strings.ReplaceAll(r.opts.Names.Driver(), ".", "-")
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
		if sc.Provisioner != r.opts.Names.Driver() {
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
	if cur.Capacity != nil && cur.Capacity.Cmp(*obj.Capacity) == 0 {
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
