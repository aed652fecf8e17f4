package claims

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind of a claimant.
type Kind string

// Claimant kinds.
const (
	KindNodeSet Kind = "LVMNodeSet"
	KindCluster Kind = "LVMCluster"
)

// NodeSet is what one LVMNodeSet claims.
type NodeSet struct {
	Name    string
	Created time.Time
	// Nodes the set selects.
	Nodes []string
	// VolumeGroups, Devices (explicit kname/path values its selectors name) and DeviceClasses of the template.
	VolumeGroups  []string
	Devices       []string
	DeviceClasses []string
	// HasDefault is true when a device class of the template is the default.
	HasDefault bool
	// LVMDSocket is the template's lvmd socket name ("" = the default).
	LVMDSocket string
	// MigratedFrom is the LVMCluster this set replaces (names.MigratedFromAnnotation), or "".
	MigratedFrom string
	// HandedOver lists the nodes that LVMCluster has handed over.
	HandedOver []string
}

// Cluster is what the namespace's LVMCluster claims.
type Cluster struct {
	Name    string
	Created time.Time
	// Nodes valid for at least one of its device classes.
	Nodes []string
}

// Incumbents is who manages each node right now, as the cluster shows it.
type Incumbents struct {
	// NodeSets maps a node to the sets that own its LVMNode.
	NodeSets map[string][]string
	// Cluster holds the nodes whose LVMVolumeGroupNodeStatus the LVMCluster owns.
	Cluster map[string]bool
}

// Input is the picture of one namespace.
type Input struct {
	NodeSets []NodeSet
	// Cluster is the namespace's LVMCluster, or nil. (A second LVMCluster is refused and claims nothing.)
	Cluster    *Cluster
	Incumbents Incumbents
}

// Conflict is one node two claimants both want.
type Conflict struct {
	Node string
	// WithKind and With name the other claimant.
	WithKind Kind
	With     string
	// Overlap says what both want, for example "volume group vg1, device /dev/sdb".
	Overlap string
	// Kept is true when the node stays with the claimant this conflict is reported to.
	Kept bool
}

// Message is the conflict as a sentence for the claimant it is reported to.
func (c Conflict) Message() string {
	if c.Kept {
		return fmt.Sprintf("%s %s also claims node %s (%s); the node stays managed by this object and %s leaves it alone until the conflict is resolved",
			c.WithKind, c.With, c.Node, c.Overlap, c.With)
	}
	return fmt.Sprintf("%s %s already manages node %s (%s); this object leaves the node alone until the conflict is resolved: change one node selector or rename the overlapping volume groups, devices or device classes",
		c.WithKind, c.With, c.Node, c.Overlap)
}

// Assignment is the outcome for one claimant.
type Assignment struct {
	// Managed nodes, sorted.
	Managed []string
	// Waiting nodes (sets only): the set's migration source still manages them, sorted.
	Waiting []string
	// Conflicts, sorted by node then by the other claimant.
	Conflicts []Conflict
}

// Result maps every claimant to its assignment.
type Result struct {
	NodeSets map[string]*Assignment
	Cluster  *Assignment
}

// NodeSet returns the assignment of the named set (empty when unknown).
func (r Result) NodeSet(name string) *Assignment {
	if a, ok := r.NodeSets[name]; ok {
		return a
	}
	return &Assignment{}
}

// Compute applies the rules of the package to in.
func Compute(in Input) Result {
	res := Result{NodeSets: map[string]*Assignment{}}
	sets := map[string]*NodeSet{}
	claimants := map[string][]*NodeSet{} // node -> sets selecting it
	for i := range in.NodeSets {
		s := &in.NodeSets[i]
		sets[s.Name] = s
		res.NodeSets[s.Name] = &Assignment{}
		for _, n := range s.Nodes {
			claimants[n] = append(claimants[n], s)
		}
	}
	clusterNodes := map[string]bool{}
	if in.Cluster != nil {
		res.Cluster = &Assignment{}
		for _, n := range in.Cluster.Nodes {
			clusterNodes[n] = true
		}
	}
	nodes := make([]string, 0, len(claimants)+len(clusterNodes))
	for n := range claimants {
		nodes = append(nodes, n)
	}
	for n := range clusterNodes {
		if _, ok := claimants[n]; !ok {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)

	for _, node := range nodes {
		candidates := claimants[node]
		clusterWants := clusterNodes[node]
		clusterLoses := false
		var remaining []*NodeSet
		for _, s := range candidates {
			if !clusterWants {
				remaining = append(remaining, s)
				continue
			}
			if s.MigratedFrom != "" && s.MigratedFrom == in.Cluster.Name {
				if slices.Contains(s.HandedOver, node) {
					clusterLoses = true
					remaining = append(remaining, s)
				} else {
					res.NodeSets[s.Name].Waiting = append(res.NodeSets[s.Name].Waiting, node)
				}
				continue
			}
			const overlap = "managed by both the v1 LVMCluster and a v2 LVMNodeSet"
			if setBeatsCluster(s, in.Cluster, node, in.Incumbents) {
				clusterLoses = true
				remaining = append(remaining, s)
				res.NodeSets[s.Name].Conflicts = append(res.NodeSets[s.Name].Conflicts,
					Conflict{Node: node, WithKind: KindCluster, With: in.Cluster.Name, Overlap: overlap, Kept: true})
				res.Cluster.Conflicts = append(res.Cluster.Conflicts,
					Conflict{Node: node, WithKind: KindNodeSet, With: s.Name, Overlap: overlap})
			} else {
				res.NodeSets[s.Name].Conflicts = append(res.NodeSets[s.Name].Conflicts,
					Conflict{Node: node, WithKind: KindCluster, With: in.Cluster.Name, Overlap: overlap})
				res.Cluster.Conflicts = append(res.Cluster.Conflicts,
					Conflict{Node: node, WithKind: KindNodeSet, With: s.Name, Overlap: overlap, Kept: true})
			}
		}
		if clusterWants && !clusterLoses {
			res.Cluster.Managed = append(res.Cluster.Managed, node)
		}
		assignSets(node, remaining, in.Incumbents, res)
	}
	for _, a := range res.NodeSets {
		sortAssignment(a)
	}
	if res.Cluster != nil {
		sortAssignment(res.Cluster)
	}
	return res
}

// assignSets accepts the sets wanting node in priority order; a set overlapping an accepted one loses.
func assignSets(node string, sets []*NodeSet, inc Incumbents, res Result) {
	owners := inc.NodeSets[node]
	slices.SortFunc(sets, func(a, b *NodeSet) int {
		ia, ib := slices.Contains(owners, a.Name), slices.Contains(owners, b.Name)
		if ia != ib {
			if ia {
				return -1
			}
			return 1
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var accepted []*NodeSet
	for _, s := range sets {
		lost := false
		for _, a := range accepted {
			if ov := overlap(a, s); ov != "" {
				lost = true
				res.NodeSets[a.Name].Conflicts = append(res.NodeSets[a.Name].Conflicts,
					Conflict{Node: node, WithKind: KindNodeSet, With: s.Name, Overlap: ov, Kept: true})
				res.NodeSets[s.Name].Conflicts = append(res.NodeSets[s.Name].Conflicts,
					Conflict{Node: node, WithKind: KindNodeSet, With: a.Name, Overlap: ov})
			}
		}
		if !lost {
			accepted = append(accepted, s)
			res.NodeSets[s.Name].Managed = append(res.NodeSets[s.Name].Managed, node)
		}
	}
}

// setBeatsCluster decides a v1/v2 conflict on node: the incumbent keeps it; otherwise the older object,
// and the LVMCluster on a tie.
func setBeatsCluster(s *NodeSet, c *Cluster, node string, inc Incumbents) bool {
	setHolds := slices.Contains(inc.NodeSets[node], s.Name)
	clusterHolds := inc.Cluster[node]
	if setHolds != clusterHolds {
		return setHolds
	}
	return s.Created.Before(c.Created)
}

// overlap says what two sets both want on one node, or "" when they can share it.
func overlap(a, b *NodeSet) string {
	var parts []string
	for _, v := range intersect(a.VolumeGroups, b.VolumeGroups) {
		parts = append(parts, "volume group "+v)
	}
	for _, d := range intersect(a.Devices, b.Devices) {
		parts = append(parts, "device "+d)
	}
	for _, d := range intersect(a.DeviceClasses, b.DeviceClasses) {
		parts = append(parts, "device class "+d)
	}
	if a.HasDefault && b.HasDefault {
		parts = append(parts, "both have a default device class")
	}
	if socketOrDefault(a.LVMDSocket) != socketOrDefault(b.LVMDSocket) {
		parts = append(parts, fmt.Sprintf("different lvmd sockets %q and %q", socketOrDefault(a.LVMDSocket), socketOrDefault(b.LVMDSocket)))
	}
	return strings.Join(parts, ", ")
}

// DefaultLVMDSocket is the lvmd socket a template without lvmd.socketName uses.
const DefaultLVMDSocket = "/run/topolvm/lvmd.sock"

func socketOrDefault(s string) string {
	if s == "" {
		return DefaultLVMDSocket
	}
	return s
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

func sortAssignment(a *Assignment) {
	slices.Sort(a.Managed)
	slices.Sort(a.Waiting)
	slices.SortFunc(a.Conflicts, func(x, y Conflict) int {
		if c := strings.Compare(x.Node, y.Node); c != 0 {
			return c
		}
		if c := strings.Compare(string(x.WithKind), string(y.WithKind)); c != 0 {
			return c
		}
		return strings.Compare(x.With, y.With)
	})
}
