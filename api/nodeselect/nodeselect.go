package nodeselect

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// transientTaints are taints the node lifecycle puts on a node for a while (not ready, unreachable, under
// pressure, cordoned). A DaemonSet tolerates them automatically, and so does selection: a node that
// reboots must not leave its set, which would tear its storage down.
var transientTaints = []string{
	corev1.TaintNodeNotReady,
	corev1.TaintNodeUnreachable,
	corev1.TaintNodeUnschedulable,
	corev1.TaintNodeDiskPressure,
	corev1.TaintNodeMemoryPressure,
	corev1.TaintNodePIDPressure,
	corev1.TaintNodeNetworkUnavailable,
}

// AgentTolerations are the tolerations the node agent always has, in addition to the user's: the transient
// taints above, with any effect.
func AgentTolerations() []corev1.Toleration {
	out := make([]corev1.Toleration, 0, len(transientTaints))
	for _, k := range transientTaints {
		out = append(out, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists})
	}
	return out
}

// Matches reports whether sel selects node by labels and fields alone, as the scheduler evaluates node
// affinity (terms ORed, expressions ANDed, an empty term selects nothing). A nil selector selects every node;
// a nil node or an invalid selector selects nothing.
func Matches(sel *corev1.NodeSelector, node *corev1.Node) bool {
	if sel == nil {
		return true
	}
	if node == nil {
		return false
	}
	ns, err := nodeaffinity.NewNodeSelector(sel)
	return err == nil && ns.Match(node)
}

// Eligible reports whether node is managed by a selector with the given tolerations: it matches the
// selector (a nil selector matches every node) and every NoSchedule or NoExecute taint on it is tolerated
// or transient. An invalid selector is an error naming the problem; the node is then not eligible.
func Eligible(node *corev1.Node, sel *corev1.NodeSelector, tolerations []corev1.Toleration) (bool, error) {
	m, err := NewMatcher(sel, tolerations)
	if err != nil {
		return false, err
	}
	return m.Eligible(node), nil
}

// Matcher is Eligible with the selector compiled once, for testing many nodes against one selector.
type Matcher struct {
	sel         *nodeaffinity.NodeSelector // nil matches every node
	tolerations []corev1.Toleration
}

// NewMatcher compiles a selector and tolerations; an invalid selector is an error naming the problem.
func NewMatcher(sel *corev1.NodeSelector, tolerations []corev1.Toleration) (*Matcher, error) {
	m := &Matcher{tolerations: append(slices.Clone(tolerations), AgentTolerations()...)}
	if sel != nil {
		ns, err := nodeaffinity.NewNodeSelector(sel)
		if err != nil {
			return nil, fmt.Errorf("invalid node selector: %w", err)
		}
		m.sel = ns
	}
	return m, nil
}

// Eligible reports whether the node matches and every NoSchedule or NoExecute taint on it is tolerated.
func (m *Matcher) Eligible(node *corev1.Node) bool {
	if m.sel != nil && !m.sel.Match(node) {
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, m.tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false)
	return !untolerated
}

// Union returns a node selector matching every node any of sels matches (terms are ORed). A nil selector
// among them matches every node, so the union is nil then; so it is when sels is empty.
func Union(sels []*corev1.NodeSelector) *corev1.NodeSelector {
	if len(sels) == 0 {
		return nil
	}
	var terms []corev1.NodeSelectorTerm
	for _, s := range sels {
		if s == nil || len(s.NodeSelectorTerms) == 0 {
			return nil
		}
		for _, t := range s.NodeSelectorTerms {
			if !slices.ContainsFunc(terms, func(have corev1.NodeSelectorTerm) bool { return equality.Semantic.DeepEqual(have, t) }) {
				terms = append(terms, *t.DeepCopy())
			}
		}
	}
	return &corev1.NodeSelector{NodeSelectorTerms: terms}
}

// Exclude returns sel narrowed so that the named nodes never match: every term gets a matchFields
// requirement metadata.name NotIn nodes. A nil selector becomes one term with only that requirement. With
// no nodes, sel is returned unchanged (a copy).
func Exclude(sel *corev1.NodeSelector, nodes []string) *corev1.NodeSelector {
	if len(nodes) == 0 {
		return sel.DeepCopy()
	}
	names := slices.Sorted(slices.Values(nodes))
	names = slices.Compact(names)
	req := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: names}
	if sel == nil || len(sel.NodeSelectorTerms) == 0 {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req}}}}
	}
	out := sel.DeepCopy()
	for i := range out.NodeSelectorTerms {
		out.NodeSelectorTerms[i].MatchFields = append(out.NodeSelectorTerms[i].MatchFields, *req.DeepCopy())
	}
	return out
}

// MergeTolerations returns the tolerations of all lists without duplicates, in a stable order (by key,
// operator, value, effect, seconds).
func MergeTolerations(lists ...[]corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, l := range lists {
		for _, t := range l {
			if !slices.ContainsFunc(out, func(have corev1.Toleration) bool { return equality.Semantic.DeepEqual(have, t) }) {
				out = append(out, *t.DeepCopy())
			}
		}
	}
	slices.SortStableFunc(out, func(a, b corev1.Toleration) int {
		for _, c := range [][2]string{{a.Key, b.Key}, {string(a.Operator), string(b.Operator)}, {a.Value, b.Value}, {string(a.Effect), string(b.Effect)}} {
			if c[0] != c[1] {
				if c[0] < c[1] {
					return -1
				}
				return 1
			}
		}
		return cmpSeconds(a.TolerationSeconds, b.TolerationSeconds)
	})
	return out
}

func cmpSeconds(a, b *int64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	case *a < *b:
		return -1
	case *a > *b:
		return 1
	}
	return 0
}
