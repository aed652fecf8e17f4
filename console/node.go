package console

import (
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console/explain"
)

// Node returns the view of one node. It fails with a *NotFoundError when the snapshot holds no LVMS state
// for the node.
func Node(s *Snapshot, name string) (*NodeView, error) {
	x := newIndex(s)
	v, ok := x.node(name, true)
	if !ok {
		return nil, &NotFoundError{Kind: "node", Name: name}
	}
	return v, nil
}

// node builds a node's view; detail adds events and volumes.
func (x *index) node(name string, detail bool) (*NodeView, bool) {
	lvmNodes, statuses := x.lvmNodes[name], x.nodeStatuses[name]
	if len(lvmNodes) == 0 && len(statuses) == 0 {
		return nil, false
	}
	v := &NodeView{Name: name, NodeExists: x.hasNode(name), At: x.s.At, Hidden: x.s.Hidden, Health: HealthOK}
	for _, n := range lvmNodes {
		x.addV2(v, n, !detail)
	}
	for _, ns := range statuses {
		x.addV1(v, ns, !detail)
	}
	// A node managed through v2 that also has a v1 object: that object's "nothing is desired here" says
	// nothing about the node's health, and would read as the opposite of the LVMNode's condition.
	if len(lvmNodes) > 0 {
		v.Conditions = slices.DeleteFunc(v.Conditions, func(c Condition) bool {
			return c.Object != nil && c.Object.API == apiV1 && (c.Reason == lvmv2.ReasonNoVolumeGroups || c.Reason == lvmv2.ReasonNoDeviceClasses)
		})
	}
	// The v2 and the v1 object of a node may carry the same condition: show it once; each other one says
	// which object it is on.
	slices.SortStableFunc(v.Conditions, func(a, b Condition) int { return strings.Compare(a.Type, b.Type) })
	v.Conditions = slices.CompactFunc(v.Conditions, func(a, b Condition) bool {
		return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
	})
	// Who gives this node storage is what the selectors say, not what happens to own its objects.
	if owners, known := x.selectedBy(name); known {
		v.Owners = owners
		if len(owners) == 0 {
			v.Differences = append(v.Differences, Difference{Node: name, Desired: "selected by an LVMNodeSet or LVMCluster",
				Actual: "selected by none", Explanation: explain.Topic(explain.TopicNodeNotSelected, "", explain.Context{Node: name}),
				Health: HealthWarning})
		}
	}
	if v.State == "" {
		v.State = "Unknown"
	}
	v.Health = worse(v.Health, stateHealth(v.State))
	if !v.NodeExists {
		v.Differences = append(v.Differences, Difference{Node: name, Desired: "Node " + name + " exists", Actual: "no such Node",
			Explanation: explain.Topic(explain.TopicNodeMissing, "", explain.Context{Node: name}), Health: HealthWarning})
	}
	for _, g := range v.VolumeGroups {
		v.Differences = append(v.Differences, vgDifferences(name, g)...)
	}
	v.Differences = append(v.Differences, lockingDifferences(v)...)
	for _, dc := range v.DeviceClasses {
		v.Differences = append(v.Differences, classDifferences(name, dc.Name, dc.StorageClass, dc.SnapshotClass)...)
		v.Health = worse(v.Health, dc.Health)
	}
	v.Differences = append(v.Differences, conditionDifferences(name, v)...)
	v.Health = worse(v.Health, stateHealth(v.State))
	for _, d := range v.Differences {
		v.Health = worse(v.Health, d.Health)
	}
	sortDifferences(v.Differences)
	for _, dc := range v.DeviceClasses {
		if dc.Capacity != nil {
			v.Capacity = append(v.Capacity, *dc.Capacity)
		}
	}
	if detail {
		v.Events = x.nodeEvents(name)
		v.Volumes = x.volumesOn(name)
		v.GroupSnapshots = x.groupSnapshots(name)
	}
	return v, true
}

// addV2 adds an LVMNode's desired and actual state (brief: see buildVG).
func (x *index) addV2(v *NodeView, n *lvmv2.LVMNode, brief bool) {
	ref := Ref{API: apiV2, Kind: "LVMNode", Namespace: n.Namespace, Name: n.Name}
	set := ownerRef(n.OwnerReferences, n.Namespace, "LVMNodeSet", apiV2)
	v.Owners = appendRef(v.Owners, set)
	st := n.Status
	v.Objects = append(v.Objects, NodeObject{Ref: ref, Generation: n.Generation, ObservedGeneration: st.ObservedGeneration,
		Stale: st.ObservedGeneration > 0 && st.ObservedGeneration < n.Generation})
	if st.State != "" {
		v.State, v.Message = string(st.State), st.Message
	}
	ctx := explain.Context{Node: n.Name}
	if st.State == "" && len(st.VolumeGroups) == 0 && len(st.Conditions) == 0 {
		v.Differences = append(v.Differences, Difference{Node: n.Name, Desired: ref.String() + " has a status", Actual: "no status",
			Explanation: explain.Topic(explain.TopicNoStatus, "", ctx), Health: HealthError})
	} else if st.ObservedGeneration > 0 && st.ObservedGeneration < n.Generation {
		v.Differences = append(v.Differences, Difference{Node: n.Name, Desired: "generation " + itoa(n.Generation),
			Actual: "status of generation " + itoa(st.ObservedGeneration), Explanation: explain.Topic(explain.TopicStaleStatus, "", ctx), Health: HealthInfo})
	}
	v.Conditions = append(v.Conditions, conditionsOn(conditionsOf(st.Conditions, ctx), ref)...)
	if st.SharedLocking != nil && v.SharedLocking == nil {
		v.SharedLocking = x.sharedLocking(n)
	}

	actual := map[string]*lvmv2.VolumeGroupStatus{}
	for i := range st.VolumeGroups {
		actual[st.VolumeGroups[i].Name] = &st.VolumeGroups[i]
	}
	// Each reported volume group is converted once, for its rows and for the capacity of its classes.
	converted := map[*lvmv2.VolumeGroupStatus]*actualVG{}
	actualOf := func(s *lvmv2.VolumeGroupStatus) *actualVG {
		if s == nil {
			return nil
		}
		a, ok := converted[s]
		if !ok {
			a = actualFromV2(s)
			converted[s] = a
		}
		return a
	}
	addVG := func(d *desiredVG, s *lvmv2.VolumeGroupStatus) {
		g := buildVG(n.Name, ref, d, actualOf(s), brief)
		g.ActiveVolumes = x.activeVolumes(s)
		v.VolumeGroups = append(v.VolumeGroups, g)
	}
	for _, g := range n.Spec.VolumeGroups {
		addVG(desiredFromV2(g, n.Spec.DeviceClasses), actual[g.Name])
		delete(actual, g.Name)
	}
	for i := range st.VolumeGroups {
		if _, left := actual[st.VolumeGroups[i].Name]; left {
			addVG(nil, &st.VolumeGroups[i])
		}
	}
	provider := lvmv2.ProviderManagedTopoLVM
	for i := range x.s.LVMNodeSets {
		if s := &x.s.LVMNodeSets[i]; s.Namespace == set.Namespace && s.Name == set.Name && s.Spec.Provider.Strategy != "" {
			provider = s.Spec.Provider.Strategy
		}
	}
	for _, dc := range n.Spec.DeviceClasses {
		ndc := NodeDeviceClass{Name: dc.Name, Source: ref, VolumeGroup: dc.VolumeGroup, Strategy: string(dc.Strategy), State: stateNotReported, Health: HealthWarning}
		var reportedSC, reportedVSC *lvmv2.ClassStatus
		if i := slices.IndexFunc(st.DeviceClasses, func(s lvmv2.DeviceClassStatus) bool { return s.Name == dc.Name }); i >= 0 {
			s := st.DeviceClasses[i]
			ndc.State, ndc.Message, ndc.Health = string(s.State), s.Message, stateHealth(string(s.State))
			reportedSC, reportedVSC = s.StorageClass, s.SnapshotClass
		}
		ndc.Capacity = x.capacityOf(n.Name, dc.Name, dc.Default, dc.Strategy == lvmv2.StrategyThin,
			actualOf(vgStatus(st.VolumeGroups, dc.VolumeGroup)), thinPoolName(dc))
		usableOnly(ndc.Capacity, ndc.State, ndc.Message)
		if provider != lvmv2.ProviderUnmanaged {
			if name := v2ClassName(dc.Name, dc.StorageClass); name != "" {
				ndc.StorageClass = x.checkStorageClass(name, dc.Name, reportedSC, explain.Context{Node: n.Name})
			}
			if dc.Strategy == lvmv2.StrategyThin {
				if name := v2SnapshotClassName(dc.Name, dc.SnapshotClass); name != "" {
					ndc.SnapshotClass = x.checkSnapshotClass(name, reportedVSC, explain.Context{Node: n.Name})
				}
			}
		}
		v.DeviceClasses = append(v.DeviceClasses, finishClass(ndc))
	}
}

// finishClass folds the class checks into a device class's health.
func finishClass(ndc NodeDeviceClass) NodeDeviceClass {
	for _, c := range []*ClassCheck{ndc.StorageClass, ndc.SnapshotClass} {
		if c != nil && c.Differs && c.Topic != nil {
			ndc.Health = worse(ndc.Health, healthOf(c.Topic.Severity))
		}
	}
	return ndc
}

func vgStatus(vgs []lvmv2.VolumeGroupStatus, name string) *lvmv2.VolumeGroupStatus {
	for i := range vgs {
		if vgs[i].Name == name {
			return &vgs[i]
		}
	}
	return nil
}

func actualFromV2(s *lvmv2.VolumeGroupStatus) *actualVG {
	if s == nil {
		return nil
	}
	a := &actualVG{name: s.Name, state: string(s.State), message: s.Message, size: s.Size, free: s.Free, volumes: s.Volumes,
		lockspace: string(s.Lockspace), initializedBy: s.InitializedBy,
		included: make([]actualDevice, 0, len(s.Devices.Included)), excluded: make([]excludedDevice, 0, len(s.Devices.Excluded))}
	for _, d := range s.Devices.Included {
		ad := actualDevice{kname: d.KName, path: d.Path, term: d.SelectorTerm, links: d.Links, size: d.Size}
		if d.Wiped != nil {
			t := d.Wiped.Time
			ad.wiped = &t
		}
		a.included = append(a.included, ad)
	}
	for _, e := range s.Devices.Excluded {
		a.excluded = append(a.excluded, excludedDevice{kname: e.KName, path: e.Path, links: e.Links, size: e.Size, reasons: e.Reasons, codes: e.ReasonCodes})
	}
	return a
}

// addV1 adds an LVMVolumeGroupNodeStatus with the device classes of its LVMCluster (brief: see buildVG).
func (x *index) addV1(v *NodeView, ns *lvmv1.LVMVolumeGroupNodeStatus, brief bool) {
	ref := Ref{API: apiV1, Kind: "LVMVolumeGroupNodeStatus", Namespace: ns.Namespace, Name: ns.Name}
	classes, owners := x.v1Classes(ns)
	for _, o := range owners {
		v.Owners = appendRef(v.Owners, o)
	}
	v.Objects = append(v.Objects, NodeObject{Ref: ref, Generation: ns.Generation, ObservedGeneration: ns.Status.ObservedGeneration})
	ctx := explain.Context{Node: ns.Name, External: x.external(owners)}
	v.Conditions = append(v.Conditions, conditionsOn(conditionsOf(ns.Status.Conditions, ctx), ref)...)
	actual := map[string]*lvmv1.VGStatus{}
	for i := range ns.Spec.LVMVGStatus {
		actual[ns.Spec.LVMVGStatus[i].Name] = &ns.Spec.LVMVGStatus[i]
	}
	// What LVMS's status shape has no field for (links, sizes) the agent writes into an annotation; a
	// malformed one (a hand edit) is ignored: the view then shows what the status alone says.
	facts, _ := lvmv1.ParseNodeFacts(ns.Annotations)
	worst := ""
	for _, dc := range classes {
		a := actual[dc.Name]
		v.VolumeGroups = append(v.VolumeGroups, buildVG(ns.Name, ref, desiredFromV1(dc), actualFromV1(a, facts), brief))
		delete(actual, dc.Name)
		ndc := NodeDeviceClass{Name: dc.Name, Source: ref, VolumeGroup: dc.Name, Strategy: "Thick", State: stateNotReported, Health: HealthWarning}
		if dc.ThinPoolConfig != nil {
			ndc.Strategy = "Thin"
		}
		if a != nil {
			ndc.State, ndc.Message, ndc.Health = string(a.Status), a.Reason, stateHealth(string(a.Status))
		}
		pool := ""
		if dc.ThinPoolConfig != nil {
			pool = dc.ThinPoolConfig.Name
		}
		ndc.Capacity = x.capacityOf(ns.Name, dc.Name, dc.Default, dc.ThinPoolConfig != nil, actualFromV1(a, facts), pool)
		usableOnly(ndc.Capacity, ndc.State, ndc.Message)
		ndc.StorageClass = x.checkStorageClass("lvms-"+dc.Name, dc.Name, nil, ctx)
		if dc.ThinPoolConfig != nil {
			ndc.SnapshotClass = x.checkSnapshotClass("lvms-"+dc.Name, nil, ctx)
		}
		v.DeviceClasses = append(v.DeviceClasses, finishClass(ndc))
	}
	for _, s := range ns.Spec.LVMVGStatus {
		if _, left := actual[s.Name]; left {
			v.VolumeGroups = append(v.VolumeGroups, buildVG(ns.Name, ref, nil, actualFromV1(&s, facts), brief))
		}
	}
	for _, s := range ns.Spec.LVMVGStatus {
		if stateHealth(string(s.Status)).Rank() >= stateHealth(worst).Rank() || worst == "" {
			worst = string(s.Status)
		}
	}
	if v.State == "" && worst != "" {
		v.State = worst
	}
}

func actualFromV1(s *lvmv1.VGStatus, facts lvmv1.NodeFacts) *actualVG {
	if s == nil {
		return nil
	}
	a := &actualVG{name: s.Name, state: string(s.Status), message: s.Reason}
	if f, ok := facts.VolumeGroups[s.Name]; ok {
		a.size, a.free = f.Size, f.Free
	}
	for _, d := range s.Devices {
		a.included = append(a.included, actualDevice{kname: d, links: facts.Devices[d]})
	}
	for _, e := range s.Excluded {
		a.excluded = append(a.excluded, excludedDevice{kname: e.Name, links: facts.Devices[e.Name], reasons: e.Reasons, codes: e.ReasonCodes})
	}
	return a
}

// conditionsOf copies conditions, sorted by type, with an explanation for every one that is not True.
func conditionsOf(conds []metav1.Condition, ctx explain.Context) []Condition {
	out := make([]Condition, 0, len(conds))
	for _, c := range conds {
		cv := Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime.Time}
		if c.Status != metav1.ConditionTrue {
			x := explain.Condition(c.Type, c.Reason, c.Message, ctx)
			cv.Explanation = &x
		}
		out = append(out, cv)
	}
	slices.SortStableFunc(out, func(a, b Condition) int { return strings.Compare(a.Type, b.Type) })
	return out
}

// conditionsOn marks cs as carried by the object ref.
func conditionsOn(cs []Condition, ref Ref) []Condition {
	for i := range cs {
		cs[i].Object = &ref
	}
	return cs
}

// conditionDifferences makes every condition that is not True a difference with its explanation (unless its
// cause is already one), and the node's headline no better than its worst node-level condition: a node whose
// device classes cannot provision is not Ready, whatever its state field says.
func conditionDifferences(node string, v *NodeView) []Difference {
	var out []Difference
	covered := func(c Condition) bool { // the cause is already a difference of its own (one finding per cause)
		return slices.ContainsFunc(v.Differences, func(d Difference) bool {
			switch c.Type {
			case "VolumeGroupsHealthy":
				return d.VolumeGroup != ""
			case "StorageClassesHealthy":
				return d.DeviceClass != ""
			}
			return false
		})
	}
	for _, c := range v.Conditions {
		if c.Explanation == nil {
			continue
		}
		actual := c.Type + " " + c.Status
		if c.Message != "" {
			actual += ": " + c.Message
		}
		// StorageClasses are cluster objects the operator writes: a missing one is the class's difference, shown
		// once for every node, not a reason to call each node degraded.
		if c.Status == string(metav1.ConditionFalse) && c.Type != "StorageClassesHealthy" && (v.State == "Ready" || v.State == "Healthy") {
			v.State, v.Message = "Degraded", actual
		}
		if covered(c) {
			continue
		}
		h := healthOf(c.Explanation.Severity)
		if c.Status == string(metav1.ConditionUnknown) {
			h = worse(h, HealthUnknown)
		}
		out = append(out, Difference{Node: node, Desired: c.Type + " True", Actual: actual, Explanation: *c.Explanation, Health: h})
	}
	return out
}

// vgDifferences lists the differences of a volume group: its own, its devices' and its pools'.
func vgDifferences(node string, g VolumeGroupView) []Difference {
	var out []Difference
	if g.Topic != nil {
		actual := g.State
		if g.Message != "" {
			actual += ": " + g.Message
		}
		desired := "volume group " + g.Name
		if !g.InSpec {
			desired = "no volume group " + g.Name
		}
		out = append(out, Difference{Node: node, VolumeGroup: g.Name, Desired: desired, Actual: actual, Explanation: *g.Topic, Health: healthOf(g.Topic.Severity)})
	}
	for _, r := range g.Devices {
		if !r.Differs {
			continue
		}
		d := Difference{Node: node, VolumeGroup: g.Name, Device: r.KName, Desired: r.Desired, Actual: r.Actual, Health: r.Health}
		switch {
		case r.Topic != nil:
			d.Explanation = *r.Topic
		case len(r.Reasons) > 0:
			d.Explanation = worstReason(r.Reasons).Explanation
		}
		out = append(out, d)
	}
	for _, p := range g.Pools {
		out = append(out, p.Findings...)
	}
	return out
}

// worstReason returns the reason with the most severe explanation (the first of equals).
func worstReason(rs []Reason) Reason {
	best := rs[0]
	for _, r := range rs[1:] {
		if r.Explanation.Severity.Rank() > best.Explanation.Severity.Rank() {
			best = r
		}
	}
	return best
}

// sortDifferences puts the worst first; among equals, device differences (the most specific, the ones to
// act on) before volume group and device class ones; then by node, volume group, device and device class.
func sortDifferences(ds []Difference) {
	specific := func(d Difference) int {
		switch {
		case d.Device != "":
			return 0
		case d.VolumeGroup != "":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(ds, func(a, b Difference) int {
		if a.Health.Rank() != b.Health.Rank() {
			return b.Health.Rank() - a.Health.Rank()
		}
		if sa, sb := specific(a), specific(b); sa != sb {
			return sa - sb
		}
		for _, p := range [][2]string{{a.Node, b.Node}, {a.VolumeGroup, b.VolumeGroup}, {a.Device, b.Device}, {a.DeviceClass, b.DeviceClass}} {
			if c := strings.Compare(p[0], p[1]); c != 0 {
				return c
			}
		}
		return 0
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
