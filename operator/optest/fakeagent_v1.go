package optest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/api/nodeselect"
)

// V1FinalizerPrefix is the per-node finalizer the fake v1 agent puts on LVMVolumeGroups
// (<prefix>/<node name>), as node agents do.
const V1FinalizerPrefix = "cleanup.node.lvm.topolvm.io/"

// V1Report decides what the fake agent reports for one volume group on one node.
type V1Report func(node string, vg *lvmv1.LVMVolumeGroup) lvmv1.VGStatus

// V1Ready reports the volume group Ready.
func V1Ready(_ string, vg *lvmv1.LVMVolumeGroup) lvmv1.VGStatus {
	return lvmv1.VGStatus{Name: vg.Name, Status: lvmv1.VGStatusReady, Devices: []string{"/dev/" + vg.Name + "-disk"}}
}

// StartFakeV1Agent plays the node agents of the v1 API for every Node that has an
// LVMVolumeGroupNodeStatus in namespace: it puts its finalizer on the LVMVolumeGroups selecting the node,
// reports them in the node status, and on deletion of an LVMVolumeGroup removes its finalizer (the volume
// group is "removed").
func StartFakeV1Agent(t testing.TB, cfg *rest.Config, namespace string, report V1Report) {
	t.Helper()
	mgr, err := Manager(t, cfg, namespace)
	if err != nil {
		t.Fatalf("fake v1 agent manager: %v", err)
	}
	a := &fakeV1Agent{c: mgr.GetClient(), ns: namespace, report: report}
	all := handler.EnqueueRequestsFromMapFunc(a.allNodes)
	if err := ctrl.NewControllerManagedBy(mgr).Named("fake-v1-node-agent").
		Watches(&lvmv1.LVMVolumeGroupNodeStatus{}, all).
		Watches(&lvmv1.LVMVolumeGroup{}, all).
		Complete(a); err != nil {
		t.Fatalf("fake v1 agent controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	Run(t, ctx, cancel, mgr)
}

type fakeV1Agent struct {
	c      client.Client
	ns     string
	report V1Report
}

func (a *fakeV1Agent) allNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	var list lvmv1.LVMVolumeGroupNodeStatusList
	if err := a.c.List(ctx, &list, client.InNamespace(a.ns)); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, st := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: a.ns, Name: st.Name}})
	}
	return out
}

func (a *fakeV1Agent) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var node corev1.Node
	if err := a.c.Get(ctx, client.ObjectKey{Name: req.Name}, &node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // a deleted node has no agent
	}
	var vgs lvmv1.LVMVolumeGroupList
	if err := a.c.List(ctx, &vgs, client.InNamespace(a.ns)); err != nil {
		return reconcile.Result{}, err
	}
	fin := V1FinalizerPrefix + node.Name
	var statuses []lvmv1.VGStatus
	for i := range vgs.Items {
		vg := &vgs.Items[i]
		if vg.DeletionTimestamp != nil {
			if controllerutil.ContainsFinalizer(vg, fin) {
				base := vg.DeepCopy()
				controllerutil.RemoveFinalizer(vg, fin)
				if err := a.c.Patch(ctx, vg, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
					return reconcile.Result{}, err
				}
			}
			continue
		}
		if ok, _ := nodeselect.Eligible(&node, vg.Spec.NodeSelector, nil); !ok {
			continue
		}
		if !controllerutil.ContainsFinalizer(vg, fin) {
			base := vg.DeepCopy()
			controllerutil.AddFinalizer(vg, fin)
			if err := a.c.Patch(ctx, vg, client.MergeFrom(base)); err != nil {
				return reconcile.Result{}, err
			}
		}
		statuses = append(statuses, a.report(node.Name, vg))
	}
	slices.SortFunc(statuses, func(x, y lvmv1.VGStatus) int {
		if x.Name < y.Name {
			return -1
		}
		return 1
	})
	var st lvmv1.LVMVolumeGroupNodeStatus
	if err := a.c.Get(ctx, req.NamespacedName, &st); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	facts := lvmv1.NodeFacts{Agent: &lvmv1.AgentFacts{Version: "test", Capabilities: []string{lvmv1.CapabilityAdoptVolumeGroups}}}.String()
	if slices.EqualFunc(st.Spec.LVMVGStatus, statuses, func(x, y lvmv1.VGStatus) bool {
		return x.Name == y.Name && x.Status == y.Status && x.Reason == y.Reason
	}) && st.Annotations[lvmv1.NodeFactsAnnotation] == facts {
		return reconcile.Result{}, nil
	}
	base := st.DeepCopy()
	st.Spec.LVMVGStatus = statuses
	// It announces what the real agent does, as the real agent does.
	if st.Annotations == nil {
		st.Annotations = map[string]string{}
	}
	st.Annotations[lvmv1.NodeFactsAnnotation] = facts
	if err := a.c.Patch(ctx, &st, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("fake v1 agent: report %s: %w", st.Name, err)
	}
	return reconcile.Result{}, nil
}
