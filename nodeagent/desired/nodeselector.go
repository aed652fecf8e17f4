package desired

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/lvms-dev/lvms/api/nodeselect"
)

// MatchesNode reports whether a v1 nodeSelector selects the node: the operator's and the console's rule
// (nodeselect.Matches), so the three never disagree.
func MatchesNode(sel *corev1.NodeSelector, node *corev1.Node) bool {
	return nodeselect.Matches(sel, node)
}
