package optest

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/operator/names"
)

// AgentRunsOn reports whether the node agent DaemonSet in ns exists and its node affinity selects node.
func AgentRunsOn(t *testing.T, c client.Client, ns, node string) bool {
	t.Helper()
	var ds appsv1.DaemonSet
	if !Get(t, c, client.ObjectKey{Namespace: ns, Name: names.NodeAgent}, &ds) {
		return false
	}
	a := ds.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	sel, err := nodeaffinity.NewNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		t.Fatalf("node agent affinity: %v", err)
	}
	var n corev1.Node
	if !Get(t, c, client.ObjectKey{Name: node}, &n) {
		t.Fatalf("Node %s missing", node)
	}
	return sel.Match(&n)
}

// DeletePV deletes a PV and lets it go as kube-controller-manager would: it drops the pv-protection
// finalizer (no controller manager runs in the test control plane).
func DeletePV(t *testing.T, c client.Client, pv *corev1.PersistentVolume) {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, pv); client.IgnoreNotFound(err) != nil {
		t.Fatalf("delete PV %s: %v", pv.Name, err)
	}
	var cur corev1.PersistentVolume
	if err := c.Get(ctx, client.ObjectKeyFromObject(pv), &cur); err != nil {
		return
	}
	base := cur.DeepCopy()
	cur.Finalizers = nil
	if err := c.Patch(ctx, &cur, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		t.Fatalf("remove finalizers of PV %s: %v", pv.Name, err)
	}
}
