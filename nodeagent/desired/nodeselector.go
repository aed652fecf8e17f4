package desired

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// MatchesNode reports whether a v1 nodeSelector selects the node: terms are ORed, expressions ANDed, as
// the scheduler evaluates them. A nil selector selects every node.
func MatchesNode(sel *corev1.NodeSelector, node *corev1.Node) bool {
	if sel == nil {
		return true
	}
	if node == nil {
		return false
	}
	for _, term := range sel.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue // an empty term selects nothing
		}
		ok := true
		for _, r := range term.MatchExpressions {
			v, has := node.Labels[r.Key]
			ok = ok && requirementMatches(r, v, has)
		}
		for _, r := range term.MatchFields {
			ok = ok && r.Key == "metadata.name" && requirementMatches(r, node.Name, true)
		}
		if ok {
			return true
		}
	}
	return false
}

func requirementMatches(r corev1.NodeSelectorRequirement, value string, has bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !has || !slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		a, err1 := strconv.ParseInt(value, 10, 64)
		b, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return a > b
		}
		return a < b
	}
	return false
}
