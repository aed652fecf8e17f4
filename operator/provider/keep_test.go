package provider

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// Which LVMNode events make the provider look at every LVMNode again: creations on nodes the selectors did
// not match at the last reconcile (or before any), and deletions; never a creation on a selected node.
func TestLVMNodesToKeep(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, lvmv1.AddToScheme, lvmv2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	node := func(name, zone string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": zone}}}
	}
	r := &Reconciler{Namespace: "lvms", Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(node("a1", "a"), node("b1", "b")).Build()}
	created := func(name string) bool {
		return r.lvmNodesToKeep().Create(event.CreateEvent{Object: &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lvms"}}})
	}
	if !created("a1") {
		t.Error("before the first reconcile: creation ignored, want it passed (nothing known yet)")
	}
	zoneA := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}
	p := placement{any: true, selectors: []*corev1.NodeSelector{zoneA}}
	if err := r.keepAgents(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"a1": false, "b1": true, "no-such-node": true} {
		if got := created(name); got != want {
			t.Errorf("LVMNode created on %s: passed = %v, want %v", name, got, want)
		}
	}
	if !r.lvmNodesToKeep().Delete(event.DeleteEvent{Object: &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: "a1", Namespace: "lvms"}}}) {
		t.Error("deletion ignored, want it passed")
	}
	if r.lvmNodesToKeep().Update(event.UpdateEvent{ObjectOld: &lvmv2.LVMNode{}, ObjectNew: &lvmv2.LVMNode{}}) {
		t.Error("update passed, want it ignored (status reports)")
	}
	// A selector covering every node (an LVMCluster with ExternalConfiguration): nothing is kept by name.
	all := placement{any: true, selectors: []*corev1.NodeSelector{nil}}
	if err := r.keepAgents(context.Background(), &all); err != nil {
		t.Fatal(err)
	}
	if created("b1") || created("no-such-node") {
		t.Error("every node selected: a creation passed, want none")
	}
}
