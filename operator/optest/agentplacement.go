package optest

import (
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
