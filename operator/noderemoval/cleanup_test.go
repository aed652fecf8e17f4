package noderemoval

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/agent"
)

const ns = "lvms"

func node(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

func meta(name string, finalizers ...string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers}
}

// cluster is two nodes' objects: worker-1 (its Node deleted) and worker-2 (alive), each with its LVMNode,
// node status and finalizer on the shared LVMVolumeGroup, which also carries the operator's own finalizer.
func cluster(funcs interceptor.Funcs, extra ...client.Object) client.Client {
	objs := []client.Object{
		node("worker-2"),
		&lvmv2.LVMNode{ObjectMeta: meta("worker-1", "lvm.topolvm.io/agent")},
		&lvmv2.LVMNode{ObjectMeta: meta("worker-2", "lvm.topolvm.io/agent")},
		&lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: meta("worker-1", "lvm.topolvm.io/agent")},
		&lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: meta("worker-2")},
		&lvmv1.LVMVolumeGroup{ObjectMeta: meta("vg1", "lvmcluster.topolvm.io", agent.VolumeGroupFinalizer("worker-1"), agent.VolumeGroupFinalizer("worker-2"))},
	}
	return fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(append(objs, extra...)...).WithInterceptorFuncs(funcs).Build()
}

func reconcileNode(t *testing.T, c client.Client, name string) error {
	t.Helper()
	_, err := (&Reconciler{Client: c, Namespace: ns}).Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}})
	return err
}

func exists(t *testing.T, c client.Client, obj client.Object, name string) bool {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func vgFinalizers(t *testing.T, c client.Client) []string {
	t.Helper()
	var vg lvmv1.LVMVolumeGroup
	if !exists(t, c, &vg, "vg1") {
		t.Fatal("the LVMVolumeGroup is gone")
	}
	return vg.Finalizers
}

// TestCleanUp_DeletedNode: once a Node is deleted its LVMNode and node status go away even though they
// carry finalizers no agent will ever remove, and its finalizer leaves the shared LVMVolumeGroup; the live
// node's objects and finalizer, and the operator's own finalizer, stay.
func TestCleanUp_DeletedNode(t *testing.T) {
	c := cluster(interceptor.Funcs{})
	if err := reconcileNode(t, c, "worker-1"); err != nil {
		t.Fatal(err)
	}
	if exists(t, c, &lvmv2.LVMNode{}, "worker-1") || exists(t, c, &lvmv1.LVMVolumeGroupNodeStatus{}, "worker-1") {
		t.Error("the deleted node's LVMNode or node status is still there")
	}
	if !exists(t, c, &lvmv2.LVMNode{}, "worker-2") || !exists(t, c, &lvmv1.LVMVolumeGroupNodeStatus{}, "worker-2") {
		t.Error("the live node's objects were deleted")
	}
	want := []string{"lvmcluster.topolvm.io", agent.VolumeGroupFinalizer("worker-2")}
	if got := vgFinalizers(t, c); !slices.Equal(got, want) {
		t.Errorf("LVMVolumeGroup finalizers %v, want %v", got, want)
	}

	// The live node's key changes nothing.
	if err := reconcileNode(t, c, "worker-2"); err != nil {
		t.Fatal(err)
	}
	if !exists(t, c, &lvmv2.LVMNode{}, "worker-2") || !slices.Equal(vgFinalizers(t, c), want) {
		t.Error("a reconcile for a live node removed its objects or finalizer")
	}
	// Nothing left of a node: nothing to do, no error.
	if err := reconcileNode(t, c, "worker-1"); err != nil {
		t.Errorf("again after the clean-up: %v", err)
	}
}

// TestCleanUp_ObjectAlreadyBeingDeleted: an LVMNode someone already deleted, stuck on its finalizer, is
// freed.
func TestCleanUp_ObjectAlreadyBeingDeleted(t *testing.T) {
	c := cluster(interceptor.Funcs{})
	var n lvmv2.LVMNode
	exists(t, c, &n, "worker-1")
	if err := c.Delete(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	if !exists(t, c, &n, "worker-1") || n.DeletionTimestamp == nil {
		t.Fatal("the LVMNode is not held by its finalizer")
	}
	deletes := 0
	c = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		deletes++
		return c.Delete(ctx, obj, opts...)
	}})
	if err := reconcileNode(t, c, "worker-1"); err != nil {
		t.Fatal(err)
	}
	if exists(t, c, &n, "worker-1") {
		t.Error("the LVMNode being deleted is still held by its finalizer")
	}
	if deletes != 1 {
		t.Errorf("%d deletes, want 1 (the node status; the LVMNode was being deleted already)", deletes)
	}
}

// TestCleanUp_LongNodeNames: the agent shortens a long node name in its finalizer; a deleted node's key that
// is the shortened form still finds its finalizer, and a live node's finalizer is never removed even when a
// deleted node's name looks like its shortened form.
func TestCleanUp_LongNodeNames(t *testing.T) {
	long := strings.Repeat("n", 80) + ".example.com"
	f := agent.VolumeGroupFinalizer(long)
	short := f[strings.LastIndex(f, "/")+1:]
	vg := &lvmv1.LVMVolumeGroup{ObjectMeta: meta("vg-long", f)}

	c := cluster(interceptor.Funcs{}, vg.DeepCopy())
	if err := reconcileNode(t, c, short); err != nil {
		t.Fatal(err)
	}
	var got lvmv1.LVMVolumeGroup
	exists(t, c, &got, "vg-long")
	if len(got.Finalizers) != 0 {
		t.Errorf("the deleted long-named node's finalizer stays: %v", got.Finalizers)
	}

	c = cluster(interceptor.Funcs{}, vg.DeepCopy(), node(long))
	if err := reconcileNode(t, c, short); err != nil {
		t.Fatal(err)
	}
	exists(t, c, &got, "vg-long")
	if !slices.Equal(got.Finalizers, []string{f}) {
		t.Errorf("the live long-named node's finalizer was removed: %v", got.Finalizers)
	}
}

// TestCleanUp_Errors: an API error is returned (the reconcile is tried again) and names what failed; the
// rest of the clean-up still happens; a failed read of the Node decides nothing.
func TestCleanUp_Errors(t *testing.T) {
	boom := errors.New("etcd is down")
	t.Run("get Node", func(t *testing.T) {
		c := cluster(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Node); ok {
				return boom
			}
			return c.Get(ctx, key, obj, opts...)
		}})
		if err := reconcileNode(t, c, "worker-1"); !errors.Is(err, boom) || !strings.Contains(err.Error(), "Node worker-1") {
			t.Errorf("got %v, want the Node's read error", err)
		}
		if !exists(t, c, &lvmv2.LVMNode{}, "worker-1") || len(vgFinalizers(t, c)) != 3 {
			t.Error("objects removed without knowing whether the Node exists")
		}
	})
	t.Run("get LVMNode", func(t *testing.T) {
		c := cluster(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*lvmv2.LVMNode); ok {
				return boom
			}
			return c.Get(ctx, key, obj, opts...)
		}})
		if err := reconcileNode(t, c, "worker-1"); !errors.Is(err, boom) || !strings.Contains(err.Error(), "LVMNode worker-1") {
			t.Errorf("got %v, want the LVMNode's read error", err)
		}
		if exists(t, c, &lvmv1.LVMVolumeGroupNodeStatus{}, "worker-1") || len(vgFinalizers(t, c)) != 2 {
			t.Error("the rest of the clean-up did not happen")
		}
	})
	t.Run("delete", func(t *testing.T) {
		c := cluster(interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*lvmv2.LVMNode); ok {
				return boom
			}
			return c.Delete(ctx, obj, opts...)
		}})
		if err := reconcileNode(t, c, "worker-1"); !errors.Is(err, boom) || !strings.Contains(err.Error(), "delete") {
			t.Errorf("got %v, want the delete error", err)
		}
		var n lvmv2.LVMNode
		if !exists(t, c, &n, "worker-1") || len(n.Finalizers) != 1 {
			t.Error("finalizers removed from an LVMNode that was not deleted (it would stay, unprotected)")
		}
		if exists(t, c, &lvmv1.LVMVolumeGroupNodeStatus{}, "worker-1") {
			t.Error("the node status was not cleaned up")
		}
	})
	t.Run("remove finalizers", func(t *testing.T) {
		c := cluster(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return boom
		}})
		err := reconcileNode(t, c, "worker-1")
		if !errors.Is(err, boom) {
			t.Fatalf("got %v, want the patch errors", err)
		}
		for _, w := range []string{"from worker-1", "from vg1"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v does not say %q", err, w)
			}
		}
	})
	t.Run("list", func(t *testing.T) {
		for _, kind := range []string{"LVMVolumeGroupList", "NodeList"} {
			c := cluster(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, isVG := list.(*lvmv1.LVMVolumeGroupList); isVG == (kind == "LVMVolumeGroupList") {
					return boom
				}
				return c.List(ctx, list, opts...)
			}})
			err := reconcileNode(t, c, "worker-1")
			if !errors.Is(err, boom) || !strings.Contains(err.Error(), "list "+strings.TrimSuffix(kind, "List")) {
				t.Errorf("%s failing: %v", kind, err)
			}
			if got := vgFinalizers(t, c); len(got) != 3 {
				t.Errorf("%s failing: finalizers removed without both lists: %v", kind, got)
			}
			if exists(t, c, &lvmv2.LVMNode{}, "worker-1") {
				t.Errorf("%s failing: the LVMNode was not cleaned up", kind)
			}
		}
	})
}

// TestFinalizerNodes: an LVMVolumeGroup maps to the nodes its per-node finalizers name, so a node deleted
// while the operator was down is still cleaned up; a finalizer without a node part maps to nothing.
func TestFinalizerNodes(t *testing.T) {
	vg := &lvmv1.LVMVolumeGroup{ObjectMeta: meta("vg1", "lvmcluster.topolvm.io", "a/", "/b",
		agent.VolumeGroupFinalizer("worker-1"), "x.io/y/worker-2")}
	var got []string
	for _, r := range (&Reconciler{Namespace: ns}).finalizerNodes(context.Background(), vg) {
		if r.Namespace != ns {
			t.Errorf("request %v outside %s", r, ns)
		}
		got = append(got, r.Name)
	}
	if want := []string{"b", "worker-1", "worker-2"}; !slices.Equal(got, want) {
		t.Errorf("mapped to %v, want %v", got, want)
	}
}

// TestCleanUp_ObjectWithoutFinalizers: an object of the deleted node that has no finalizer goes at its
// deletion; the clean-up goes on with the node's other objects.
func TestCleanUp_ObjectWithoutFinalizers(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(
		&lvmv2.LVMNode{ObjectMeta: meta("worker-1")},
		&lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: meta("worker-1", "lvm.topolvm.io/agent")}).Build()
	if err := reconcileNode(t, c, "worker-1"); err != nil {
		t.Fatal(err)
	}
	if exists(t, c, &lvmv2.LVMNode{}, "worker-1") || exists(t, c, &lvmv1.LVMVolumeGroupNodeStatus{}, "worker-1") {
		t.Error("the deleted node's objects are still there")
	}
}
