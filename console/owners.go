package console

import (
	corev1 "k8s.io/api/core/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/api/nodeselect"
)

// selectedBy returns the LVMNodeSets and LVMClusters that select the node, by the operator's own rule
// (nodeselect.Eligible: node selector and tolerations). known is false when the caller cannot see the Node,
// whose labels and taints decide; the views then fall back to what the per-node objects say.
func (x *index) selectedBy(name string) (owners []Ref, known bool) {
	node, ok := x.nodes[name]
	if !ok || x.s.IsHidden("nodes") {
		return nil, false
	}
	x.matchersOnce.Do(func() {
		x.setMatchers = make([]*nodeselect.Matcher, len(x.s.LVMNodeSets))
		for i := range x.s.LVMNodeSets {
			set := &x.s.LVMNodeSets[i]
			x.setMatchers[i], _ = nodeselect.NewMatcher(set.Spec.NodeSelector, set.Spec.Tolerations) // nil: invalid, selects nothing
		}
	})
	for i, m := range x.setMatchers {
		if set := &x.s.LVMNodeSets[i]; m != nil && m.Eligible(node) {
			owners = append(owners, Ref{API: apiV2, Kind: "LVMNodeSet", Namespace: set.Namespace, Name: set.Name})
		}
	}
	for i := range x.s.LVMClusters {
		if c := &x.s.LVMClusters[i]; clusterSelects(c, node) {
			owners = append(owners, Ref{API: apiV1, Kind: "LVMCluster", Namespace: c.Namespace, Name: c.Name})
		}
	}
	return owners, true
}

// clusterSelects reports whether an LVMCluster manages the node: one of its device classes selects it, or,
// with ExternalConfiguration, its tolerations allow the node (the operator's inventory does the same).
func clusterSelects(c *lvmv1.LVMCluster, node *corev1.Node) bool {
	if c.Spec.ConfigurationPolicy == lvmv1.ConfigurationPolicyExternal {
		ok, _ := nodeselect.Eligible(node, nil, c.Spec.Tolerations)
		return ok
	}
	for _, dc := range c.Spec.Storage.DeviceClasses {
		if ok, _ := nodeselect.Eligible(node, dc.NodeSelector, c.Spec.Tolerations); ok {
			return true
		}
	}
	return false
}

// definesClass reports whether the set or cluster r has a device class of that name.
func (x *index) definesClass(r Ref, class string) bool {
	switch r.Kind {
	case "LVMNodeSet":
		for i := range x.s.LVMNodeSets {
			if s := &x.s.LVMNodeSets[i]; s.Namespace == r.Namespace && s.Name == r.Name {
				for _, dc := range s.Spec.Template.DeviceClasses {
					if dc.Name == class {
						return true
					}
				}
			}
		}
	case "LVMCluster":
		for i := range x.s.LVMClusters {
			if c := &x.s.LVMClusters[i]; c.Namespace == r.Namespace && c.Name == r.Name {
				for _, dc := range c.Spec.Storage.DeviceClasses {
					if dc.Name == class {
						return true
					}
				}
			}
		}
	}
	return false
}

// definers are the LVMNodeSets or LVMClusters (kind) of a namespace.
func (x *index) definers(kind, namespace string) []Ref {
	var out []Ref
	if kind == "LVMNodeSet" {
		for i := range x.s.LVMNodeSets {
			if s := &x.s.LVMNodeSets[i]; s.Namespace == namespace {
				out = append(out, Ref{API: apiV2, Kind: kind, Namespace: namespace, Name: s.Name})
			}
		}
		return out
	}
	for _, c := range x.clustersByNS[namespace] {
		out = append(out, Ref{API: apiV1, Kind: kind, Namespace: namespace, Name: c.Name})
	}
	return out
}

// external reports whether one of the LVMClusters among owners leaves lvmd.yaml to the host.
func (x *index) external(owners []Ref) bool {
	for _, r := range owners {
		for _, c := range x.clustersByNS[r.Namespace] {
			if r.Kind == "LVMCluster" && c.Name == r.Name && c.Spec.ConfigurationPolicy == lvmv1.ConfigurationPolicyExternal {
				return true
			}
		}
	}
	return false
}
