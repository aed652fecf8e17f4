package console

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/console/explain"
)

// MaxOverviewDifferences caps the differences listed on the overview; the node pages list all of them.
const MaxOverviewDifferences = 50

// BuildOverview returns the landing view of a snapshot. It is computed once per snapshot and shared by
// every caller, which must not modify it; a snapshot must not change once a view was built from it.
func BuildOverview(s *Snapshot) *Overview {
	c := s.cached()
	c.overviewOnce.Do(func() { c.overview = buildOverview(s) })
	return c.overview
}

func buildOverview(s *Snapshot) *Overview {
	x := newIndex(s)
	o := &Overview{At: s.At, Cluster: s.Cluster, User: s.User, Installed: s.Installed, Hidden: s.Hidden}
	views := make(map[string]*NodeView, len(x.names))
	o.Nodes = make([]NodeSummary, 0, len(x.names))
	built := x.briefViews(x.names)
	for i, name := range x.names {
		v := built[i]
		if v == nil {
			continue
		}
		views[name] = v
		sum := NodeSummary{Name: name, State: v.State, Message: v.Message, Health: v.Health, Owners: v.Owners,
			VolumeGroups: len(v.VolumeGroups), Differences: len(v.Differences)}
		for _, g := range v.VolumeGroups {
			sum.DevicesInUse += g.counts.inUse
			sum.Excluded += g.counts.excluded
			sum.Missing += g.counts.missing
		}
		o.Nodes = append(o.Nodes, sum)
		t := &o.Totals
		t.Nodes++
		if v.State == "Ready" {
			t.NodesReady++
		}
		if len(v.Differences) > 0 {
			t.NodesDiffer++
		}
		t.VolumeGroups += sum.VolumeGroups
		t.DevicesInUse += sum.DevicesInUse
		t.Excluded += sum.Excluded
		t.Missing += sum.Missing
	}
	// The nodes' differences in one allocation (appending them node by node copies them again and again).
	count := 0
	for _, v := range views {
		count += len(v.Differences)
	}
	if count > 0 {
		o.Differences = make([]Difference, 0, count)
	}
	for _, name := range x.names {
		if v := views[name]; v != nil {
			o.Differences = append(o.Differences, v.Differences...)
		}
	}
	// The worst first; at the same health, a node whose state is not Ready before one that is, so that a
	// warning every node shares (a missing StorageClass) does not bury the Degraded nodes among thousands.
	slices.SortStableFunc(o.Nodes, func(a, b NodeSummary) int {
		if a.Health.Rank() != b.Health.Rank() {
			return b.Health.Rank() - a.Health.Rank()
		}
		if ra, rb := stateHealth(a.State).Rank(), stateHealth(b.State).Rank(); ra != rb {
			return rb - ra
		}
		return strings.Compare(a.Name, b.Name)
	})
	classes := x.deviceClasses(views)
	for _, c := range classes {
		o.Capacity = append(o.Capacity, c.Capacity)
		o.Differences = append(o.Differences, c.Differences...)
	}
	o.Totals.DeviceClasses = len(classes)
	o.Totals.Volumes = len(s.LogicalVolumes)
	sortDifferences(o.Differences)
	o.Differences = dedupeDifferences(o.Differences)
	o.Owners = x.owners()
	return o
}

// dedupeDifferences drops a device class difference repeated on every node (a missing StorageClass is one
// problem, not one per node), keeping the first.
func dedupeDifferences(ds []Difference) []Difference {
	seen := map[string]bool{}
	out := ds[:0]
	for _, d := range ds {
		if d.DeviceClass != "" {
			k := d.DeviceClass + "\x00" + d.Desired + "\x00" + d.Explanation.Code
			if seen[k] {
				continue
			}
			seen[k] = true
			d.Node = ""
		}
		out = append(out, d)
	}
	return out
}

// owners summarises the LVMNodeSets and LVMClusters.
// briefViews builds the brief views of the named nodes (nil for a node with nothing to show) on every CPU:
// each node's view reads only the snapshot, and at thousands of nodes comparing every device is most of
// what a changed cluster costs the console.
func (x *index) briefViews(names []string) []*NodeView {
	out := make([]*NodeView, len(names))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(1, len(names)/32)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(names); i = int(next.Add(1) - 1) {
				if v, ok := x.node(names[i], false); ok {
					out[i] = v
				}
			}
		})
	}
	wg.Wait()
	return out
}

func (x *index) owners() []OwnerSummary {
	var out []OwnerSummary
	for _, s := range x.s.LVMNodeSets {
		o := OwnerSummary{Ref: Ref{API: apiV2, Kind: "LVMNodeSet", Namespace: s.Namespace, Name: s.Name}, State: string(s.Status.State),
			Message: s.Status.Message, Desired: int(s.Status.DesiredNodes), Ready: int(s.Status.ReadyNodes),
			Conditions: conditionsOf(s.Status.Conditions, explain.Context{})}
		out = append(out, finishOwner(o))
	}
	for _, c := range x.s.LVMClusters {
		o := OwnerSummary{Ref: Ref{API: apiV1, Kind: "LVMCluster", Namespace: c.Namespace, Name: c.Name}, State: string(c.Status.State),
			Message: c.Status.Message, Conditions: conditionsOf(c.Status.Conditions, explain.Context{})}
		o.Desired, o.Ready = v1NodeCounts(c)
		out = append(out, finishOwner(o))
	}
	return out
}

func finishOwner(o OwnerSummary) OwnerSummary {
	if o.State == "" {
		o.State = "Unknown"
	}
	o.Health = stateHealth(o.State)
	return o
}

// v1NodeCounts counts the nodes an LVMCluster's status lists and those whose volume groups are all Ready.
func v1NodeCounts(c lvmv1.LVMCluster) (desired, ready int) {
	ok := map[string]bool{}
	var names []string
	for _, dcs := range c.Status.DeviceClassStatuses {
		for _, n := range dcs.NodeStatus {
			if _, seen := ok[n.Node]; !seen {
				ok[n.Node] = true
				names = append(names, n.Node)
			}
			if n.Status != lvmv1.VGStatusReady {
				ok[n.Node] = false
			}
		}
	}
	for _, n := range names {
		if ok[n] {
			ready++
		}
	}
	return len(names), ready
}
