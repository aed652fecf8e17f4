package optest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// AgentFinalizer is the finalizer the node agent keeps on an LVMNode until it removed its volume groups.
const AgentFinalizer = "lvm.topolvm.io/node-agent"

// FakeAgentWorkers is how many nodes the fake agent reports for at once.
const FakeAgentWorkers = 16

// Report decides what the fake agent reports for an LVMNode; nil means "do not report".
type Report func(n *lvmv2.LVMNode) *lvmv2.LVMNodeStatus

// ReportReady reports every volume group Healthy and every device class Healthy.
func ReportReady(n *lvmv2.LVMNode) *lvmv2.LVMNodeStatus {
	st := &lvmv2.LVMNodeStatus{State: lvmv2.StateReady}
	for _, vg := range n.Spec.VolumeGroups {
		st.VolumeGroups = append(st.VolumeGroups, lvmv2.VolumeGroupStatus{Name: vg.Name, State: lvmv2.StateHealthy})
	}
	for _, dc := range n.Spec.DeviceClasses {
		st.DeviceClasses = append(st.DeviceClasses, lvmv2.DeviceClassStatus{Name: dc.Name, VolumeGroup: dc.VolumeGroup, State: lvmv2.StateHealthy})
	}
	return st
}

// StartFakeAgent plays the node agents of every LVMNode in namespace, in one controller: on every spec
// change it writes the status report returns, with observedGeneration set; the conditions report returns
// are set by type (as the agent sets its own), the others kept (those other writers own). Real agents are one process per node, each with its own client: the fake one reports for
// FakeAgentWorkers nodes at a time, without a client-side rate limit. It stops when the test ends.
func StartFakeAgent(t testing.TB, cfg *rest.Config, namespace string, report Report) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side limit: thousands of agents do not share one
	mgr, err := Manager(t, cfg, namespace)
	if err != nil {
		t.Fatalf("fake agent manager: %v", err)
	}
	r := &fakeAgent{c: mgr.GetClient(), report: report}
	if err := ctrl.NewControllerManagedBy(mgr).Named("fake-node-agent").For(&lvmv2.LVMNode{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: FakeAgentWorkers}).Complete(r); err != nil {
		t.Fatalf("fake agent controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	Run(t, ctx, cancel, mgr)
}

type fakeAgent struct {
	c      client.Client
	report Report
}

func (a *fakeAgent) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var n lvmv2.LVMNode
	if err := a.c.Get(ctx, req.NamespacedName, &n); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var node corev1.Node
	if err := a.c.Get(ctx, client.ObjectKey{Name: n.Name}, &node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // a deleted node has no agent
	}
	if n.DeletionTimestamp != nil {
		// The volume groups are "removed": let the LVMNode go, as the agent does.
		if controllerutil.ContainsFinalizer(&n, AgentFinalizer) {
			base := n.DeepCopy()
			controllerutil.RemoveFinalizer(&n, AgentFinalizer)
			return reconcile.Result{}, client.IgnoreNotFound(a.c.Patch(ctx, &n, client.MergeFrom(base)))
		}
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(&n, AgentFinalizer) {
		base := n.DeepCopy()
		controllerutil.AddFinalizer(&n, AgentFinalizer)
		if err := a.c.Patch(ctx, &n, client.MergeFrom(base)); err != nil {
			return reconcile.Result{}, err
		}
	}
	if n.Status.ObservedGeneration == n.Generation && n.Status.State != "" {
		return reconcile.Result{}, nil
	}
	st := a.report(&n)
	if st == nil {
		return reconcile.Result{}, nil
	}
	base := n.DeepCopy()
	st.ObservedGeneration = n.Generation
	conds := slices.Clone(n.Status.Conditions)
	for _, c := range st.Conditions {
		meta.SetStatusCondition(&conds, c)
	}
	st.Conditions = conds
	n.Status = *st
	if err := a.c.Status().Patch(ctx, &n, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("fake agent: report %s: %w", n.Name, err)
	}
	return reconcile.Result{}, nil
}

// Condition finds a condition by type.
func Condition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
