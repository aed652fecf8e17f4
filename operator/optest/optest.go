package optest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/names"
)

// Manager returns a manager for tests: the operator's scheme and cache for namespace, no metrics or probe
// listeners, controller names that may repeat across managers of one process, and a logger writing to the
// test's log at the verbosity of LVMS_TEST_LOG_LEVEL (errors only when unset).
func Manager(t testing.TB, cfg *rest.Config, namespace string) (ctrl.Manager, error) {
	mo := operator.ManagerOptions(operator.Options{Namespace: namespace})
	mo.Metrics = metricsserver.Options{BindAddress: "0"}
	mo.HealthProbeBindAddress = "0"
	skip := true
	mo.Controller = config.Controller{SkipNameValidation: &skip}
	verbosity, err := strconv.Atoi(os.Getenv("LVMS_TEST_LOG_LEVEL"))
	if err != nil {
		verbosity = -1
	}
	mo.Logger = funcr.New(func(prefix, args string) {
		if verbosity >= 0 || strings.Contains(args, `"error"`) {
			t.Log(prefix, args)
		}
	}, funcr.Options{Verbosity: max(verbosity, 0)})
	return ctrl.NewManager(cfg, mo)
}

// Start runs the operator for namespace until the test ends and returns its manager's client.
func Start(t testing.TB, cfg *rest.Config, opts operator.Options) client.Client {
	t.Helper()
	mgr, err := Manager(t, cfg, opts.Namespace)
	if err != nil {
		t.Fatalf("operator manager: %v", err)
	}
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), mgr.GetLogger()))
	if err := operator.Setup(ctx, mgr, opts); err != nil {
		cancel()
		t.Fatalf("operator setup: %v", err)
	}
	Run(t, ctx, cancel, mgr)
	return mgr.GetClient()
}

// Run starts mgr and stops it (and waits for it) when the test ends.
func Run(t testing.TB, ctx context.Context, cancel context.CancelFunc, mgr ctrl.Manager) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager stopped with: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatalf("manager cache did not sync")
	}
}

// Node creates a Node with labels (a test plays the kubelet: no status beyond what it sets) and deletes it
// when the test ends.
func Node(t testing.TB, c client.Client, name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	if err := c.Create(context.Background(), n); err != nil {
		t.Fatalf("create Node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(c.Delete(context.Background(), n)) })
	return n
}

// Ready makes a Node look like one whose kubelet reports Ready, as the node lifecycle controller would have it:
// the not-ready taint the API server puts on a new node is lifted and the Ready condition is True.
func Ready(t testing.TB, c client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		t.Fatalf("get Node %s: %v", name, err)
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	if err := c.Update(ctx, n); err != nil {
		t.Fatalf("lift the not-ready taint of Node %s: %v", name, err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatalf("mark Node %s Ready: %v", name, err)
	}
}

// DefaultTimeout bounds Eventually.
const DefaultTimeout = 60 * time.Second

// Eventually calls check until it returns true or DefaultTimeout passes; then the test fails with the last
// description check gave of what it saw.
func Eventually(t testing.TB, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(DefaultTimeout)
	var last string
	for {
		ok, desc := check()
		if ok {
			return
		}
		last = desc
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", DefaultTimeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Get fetches obj by key and reports whether it exists; other errors fail the test.
func Get(t testing.TB, c client.Client, key client.ObjectKey, obj client.Object) bool {
	t.Helper()
	err := c.Get(context.Background(), key, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("get %T %s: %v", obj, key, err)
	}
	return true
}

// Describe formats v for failure messages.
func Describe(v any) string { return fmt.Sprintf("%+v", v) }

// CleanUpNamespace deletes, when the test ends and while its operator still runs, every LVMNodeSet and
// LVMCluster of namespace, and waits until they are gone, so that cluster-scoped objects (CSIDriver,
// classes) do not outlive the test. Register it after Start (cleanups run last-in first-out).
func CleanUpNamespace(t testing.TB, c client.Client, namespace string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		var pvcs corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &pvcs, client.InNamespace(namespace)); err == nil {
			for i := range pvcs.Items {
				DeleteVolume(t, c, &pvcs.Items[i])
			}
		}
		for _, obj := range []client.Object{&lvmv2.LVMNodeSet{}, &lvmv1.LVMCluster{}} {
			if err := c.DeleteAllOf(ctx, obj, client.InNamespace(namespace)); err != nil {
				t.Errorf("clean up %T: %v", obj, err)
			}
		}
		Eventually(t, "the test's LVMNodeSets and LVMClusters to be gone", func() (bool, string) {
			var sets lvmv2.LVMNodeSetList
			var clusters lvmv1.LVMClusterList
			if err := c.List(ctx, &sets, client.InNamespace(namespace)); err != nil {
				return false, err.Error()
			}
			if err := c.List(ctx, &clusters, client.InNamespace(namespace)); err != nil {
				return false, err.Error()
			}
			return len(sets.Items)+len(clusters.Items) == 0, fmt.Sprintf("%d sets, %d clusters", len(sets.Items), len(clusters.Items))
		})
		Eventually(t, "the test's CSIDriver and classes to be pruned", func() (bool, string) {
			var drivers storagev1.CSIDriverList
			var scs storagev1.StorageClassList
			owned := client.MatchingLabels{names.OwnerNamespaceLabel: namespace}
			if err := c.List(ctx, &drivers, owned); err != nil {
				return false, err.Error()
			}
			if err := c.List(ctx, &scs, owned); err != nil {
				return false, err.Error()
			}
			return len(drivers.Items)+len(scs.Items) == 0, fmt.Sprintf("%d CSIDrivers, %d StorageClasses", len(drivers.Items), len(scs.Items))
		})
	})
}

// DeleteVolume deletes a PVC or PV as kube-controller-manager would let it go: it also removes the
// protection finalizer the API server adds (there is no controller manager in the test control plane).
func DeleteVolume(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		t.Fatalf("delete %T %s: %v", obj, obj.GetName(), err)
	}
	cur := obj.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return
	}
	base := cur.DeepCopyObject().(client.Object)
	cur.SetFinalizers(nil)
	if err := c.Patch(ctx, cur, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		t.Fatalf("remove finalizers of %T %s: %v", obj, obj.GetName(), err)
	}
}

// LaggingCache serves Stale (when set) for Gets of that object instead of the server's version, as an
// informer cache that has not received the latest writes does; everything else goes to Client.
type LaggingCache struct {
	client.Client
	Stale client.Object
}

func (c *LaggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c.Stale != nil && key == client.ObjectKeyFromObject(c.Stale) && reflect.TypeOf(obj) == reflect.TypeOf(c.Stale) {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(c.Stale.DeepCopyObject()).Elem())
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// ReadByLastStatusWrite reconciles by hand until a pass writes no status (at most 10 passes) and returns
// the object as read before the last pass that wrote one: what a LaggingCache serves to test a reconcile
// that starts before the cache has that write. statusWrites is the number of status writes so far.
func ReadByLastStatusWrite[T client.Object](t testing.TB, reconcile func() error, read func() T, statusWrites func() int) T {
	t.Helper()
	var last T
	wrote := false
	for pass := 1; pass <= 10; pass++ {
		obj, before := read(), statusWrites()
		if err := reconcile(); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		switch {
		case statusWrites() > before:
			last, wrote = obj, true
		case wrote:
			return last
		}
	}
	t.Fatalf("the status still changes after 10 passes (%d status writes): a computed status the API server stores differently (a CRD default) or one that depends on the time", statusWrites())
	return last
}

// ReleaseOnCleanup is for tests that reconcile by hand, with no operator to finalize what they create: at
// clean-up (before CleanUpNamespace, registered earlier, waits for it) it drops the finalizers of the object
// named like obj, deletes it, and deletes the StorageClasses generated for its namespace.
func ReleaseOnCleanup(t testing.TB, c client.Client, obj client.Object) {
	t.Cleanup(func() {
		ctx := context.Background()
		cur := obj.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err == nil {
			cur.SetFinalizers(nil)
			_ = c.Update(ctx, cur)
			_ = c.Delete(ctx, cur)
		}
		_ = c.DeleteAllOf(ctx, &storagev1.StorageClass{}, client.MatchingLabels{names.OwnerNamespaceLabel: obj.GetNamespace()})
	})
}

// PruneOwnedOnCleanup is for tests that run the operator as a process and do not delete their sets at the
// end (thousands of LVMNodes): when the test ends it deletes the cluster-scoped objects that operator made
// for namespace (CSIDriver, StorageClasses), which would otherwise keep the next test's operator from
// installing the driver. Register it before the process starts, so that it runs after the process ended.
func PruneOwnedOnCleanup(t testing.TB, c client.Client, namespace string) {
	t.Cleanup(func() {
		ctx := context.Background()
		owned := client.MatchingLabels{names.OwnerNamespaceLabel: namespace}
		for _, obj := range []client.Object{&storagev1.CSIDriver{}, &storagev1.StorageClass{}} {
			if err := c.DeleteAllOf(ctx, obj, owned); err != nil {
				t.Errorf("delete the %T objects the operator of %s made: %v", obj, namespace, err)
			}
		}
	})
}
