package nodeselect

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func selector(key string, op corev1.NodeSelectorOperator, values ...string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}},
	}}}
}

func TestEligible(t *testing.T) {
	workerTaint := corev1.Taint{Key: "dedicated", Value: "storage", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name        string
		node        *corev1.Node
		sel         *corev1.NodeSelector
		tolerations []corev1.Toleration
		want        bool
		wantErr     string
	}{
		{name: "nil selector matches an untainted node", node: node("a", nil), want: true},
		{name: "matching label", node: node("a", map[string]string{"zone": "x"}), sel: selector("zone", corev1.NodeSelectorOpIn, "x"), want: true},
		{name: "non-matching label", node: node("a", map[string]string{"zone": "y"}), sel: selector("zone", corev1.NodeSelectorOpIn, "x"), want: false},
		{name: "untolerated NoSchedule taint excludes", node: node("a", nil, workerTaint), want: false},
		{name: "tolerated taint", node: node("a", nil, workerTaint), tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "storage"}}, want: true},
		{name: "PreferNoSchedule taint does not exclude", node: node("a", nil, corev1.Taint{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}), want: true},
		{name: "a not-ready node stays selected", node: node("a", nil, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}), want: true},
		{name: "a cordoned node stays selected", node: node("a", nil, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}), want: true},
		{name: "matchFields on the name", node: node("a", nil), sel: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}, want: true},
		{name: "invalid selector is an error", node: node("a", nil), sel: selector("zone", corev1.NodeSelectorOpIn), wantErr: "invalid node selector"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Eligible(tc.node, tc.sel, tc.tolerations)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Eligible = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnion(t *testing.T) {
	a := selector("zone", corev1.NodeSelectorOpIn, "a")
	b := selector("zone", corev1.NodeSelectorOpIn, "b")
	tests := []struct {
		name      string
		sels      []*corev1.NodeSelector
		wantNil   bool
		wantTerms int
	}{
		{name: "none is every node", sels: nil, wantNil: true},
		{name: "one nil selector is every node", sels: []*corev1.NodeSelector{a, nil}, wantNil: true},
		{name: "terms are ORed", sels: []*corev1.NodeSelector{a, b}, wantTerms: 2},
		{name: "duplicate terms appear once", sels: []*corev1.NodeSelector{a, a.DeepCopy(), b}, wantTerms: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Union(tc.sels)
			if tc.wantNil {
				if got != nil {
					t.Fatalf("Union = %v, want nil", got)
				}
				return
			}
			if got == nil || len(got.NodeSelectorTerms) != tc.wantTerms {
				t.Fatalf("Union = %v, want %d terms", got, tc.wantTerms)
			}
			for _, n := range []*corev1.Node{node("x", map[string]string{"zone": "a"}), node("y", map[string]string{"zone": "b"})} {
				if ok, _ := Eligible(n, got, nil); !ok {
					t.Errorf("union does not match %s", n.Name)
				}
			}
		})
	}
}

func TestExclude(t *testing.T) {
	zone := selector("zone", corev1.NodeSelectorOpIn, "a")
	tests := []struct {
		name    string
		sel     *corev1.NodeSelector
		nodes   []string
		matches map[string]bool
	}{
		{name: "nil selector excludes only the named nodes", sel: nil, nodes: []string{"n2"},
			matches: map[string]bool{"n1": true, "n2": false}},
		{name: "selector keeps its own restriction", sel: zone, nodes: []string{"n2"},
			matches: map[string]bool{"n1": true, "n2": false, "other-zone": false}},
		{name: "no nodes leaves it unchanged", sel: zone, nodes: nil,
			matches: map[string]bool{"n1": true, "n2": true, "other-zone": false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Exclude(tc.sel, tc.nodes)
			for name, want := range tc.matches {
				labels := map[string]string{"zone": "a"}
				if name == "other-zone" {
					labels["zone"] = "b"
				}
				ok, err := Eligible(node(name, labels), got, nil)
				if err != nil {
					t.Fatal(err)
				}
				if ok != want {
					t.Errorf("node %s eligible = %v, want %v", name, ok, want)
				}
			}
			if tc.sel != nil && len(tc.sel.NodeSelectorTerms[0].MatchFields) != 0 {
				t.Errorf("Exclude changed its argument")
			}
		})
	}
}

func TestMergeTolerations(t *testing.T) {
	a := corev1.Toleration{Key: "b", Operator: corev1.TolerationOpExists}
	b := corev1.Toleration{Key: "a", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoSchedule}
	got := MergeTolerations([]corev1.Toleration{a, b}, []corev1.Toleration{b})
	if len(got) != 2 || got[0].Key != "a" || got[1].Key != "b" {
		t.Fatalf("MergeTolerations = %+v, want a then b once each", got)
	}
}
