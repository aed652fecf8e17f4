package console

import (
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/console/explain"
)

// Provisioners of LVMS StorageClasses: the TopoLVM-compatible driver, its legacy name and the shared driver.
var lvmsProvisioners = []string{"topolvm.io", "topolvm.cybozu.com", "shared.lvm.topolvm.io"}

// deviceClassParameters are the StorageClass parameters that name the device class: TopoLVM's, and the legacy
// group's that every LVMS driver (topolvm.cybozu.com, the shared driver) writes in legacy mode.
var deviceClassParameters = [...]string{driver.New(false).DeviceClassParam(), driver.New(true).DeviceClassParam()}

// deviceClassOf is the device class a StorageClass provisions from ("" when it names none).
func deviceClassOf(sc *storagev1.StorageClass) string {
	for _, p := range deviceClassParameters {
		if dc, ok := sc.Parameters[p]; ok {
			return dc
		}
	}
	return ""
}

const defaultClassPrefix = "lvms"

// v2ClassName is the StorageClass name a device class's naming policy asks for ("" for policy None).
func v2ClassName(dc string, t *lvmv2.StorageClassTemplate) string {
	if t == nil {
		return defaultClassPrefix + "-" + dc
	}
	return className(dc, t.NamingPolicy, t.Prefix, t.Name)
}

// v2SnapshotClassName is the VolumeSnapshotClass name a thin device class's naming policy asks for.
func v2SnapshotClassName(dc string, t *lvmv2.SnapshotClassTemplate) string {
	if t == nil {
		return defaultClassPrefix + "-" + dc
	}
	return className(dc, t.NamingPolicy, t.Prefix, t.Name)
}

func className(dc string, policy lvmv2.NamingPolicy, prefix, name string) string {
	switch policy {
	case lvmv2.NamingNone:
		return ""
	case lvmv2.NamingExplicit:
		return name
	}
	if prefix == "" {
		prefix = defaultClassPrefix
	}
	return prefix + "-" + dc
}

// checkStorageClass compares the StorageClass a device class should have with the cluster (and with what
// the agent reported, when it did).
func (x *index) checkStorageClass(name, deviceClass string, reported *lvmv2.ClassStatus, ctx explain.Context) *ClassCheck {
	c := &ClassCheck{Name: name}
	if reported != nil {
		c.Reported = string(reported.State)
	}
	if reason, hidden := x.s.hiddenReason("storageclasses.storage.k8s.io"); hidden {
		x.unknowable(c, reason)
	} else if sc, ok := x.scs[name]; ok {
		c.InCluster = true
		c.Matches = slices.Contains(lvmsProvisioners, sc.Provisioner) && deviceClassOf(sc) == deviceClass
		c.Differs = !c.Matches
	} else {
		c.Differs = true
	}
	if c.Differs {
		topic, detail := explain.TopicStorageClassMissing, "StorageClass "+name+" does not exist."
		if c.InCluster {
			topic, detail = explain.TopicStorageClassMismatch, "StorageClass "+name+" exists but does not provision from device class "+deviceClass+"."
		}
		t := explain.Topic(topic, detail, ctx)
		c.Topic = &t
	}
	return c
}

// unknowable settles c when the console cannot read classes of its kind (reason says why): the agent's
// report is then all there is to go by; without one, whether the class exists cannot be known, and c says
// that instead of guessing.
func (x *index) unknowable(c *ClassCheck, reason string) {
	if c.Reported == "" {
		c.Unknown, c.Matches = reason, false
		return
	}
	c.InCluster, c.Matches = c.Reported != string(lvmv2.StateMissing), true
	c.Differs = !c.InCluster
}

// checkSnapshotClass compares the VolumeSnapshotClass a thin device class should have with the cluster.
func (x *index) checkSnapshotClass(name string, reported *lvmv2.ClassStatus, ctx explain.Context) *ClassCheck {
	c := &ClassCheck{Name: name, Matches: true}
	if reported != nil {
		c.Reported = string(reported.State)
	}
	if reason, hidden := x.s.hiddenReason("volumesnapshotclasses.snapshot.storage.k8s.io"); hidden {
		x.unknowable(c, reason)
	} else if vsc, ok := x.vscs[name]; ok {
		c.InCluster = true
		c.Matches = slices.Contains(lvmsProvisioners, vsc.Driver)
		c.Differs = !c.Matches
	} else {
		c.Differs = true
	}
	if c.Differs {
		t := explain.Topic(explain.TopicSnapshotClassMissing, "VolumeSnapshotClass "+name+" does not exist or does not use an LVMS driver.", ctx)
		c.Topic = &t
	}
	return c
}

// classDifferences lists the class checks that differ.
func classDifferences(node, dc string, checks ...*ClassCheck) []Difference {
	var out []Difference
	for _, c := range checks {
		if c == nil || !c.Differs || c.Topic == nil {
			continue
		}
		actual := "not in the cluster"
		if c.InCluster {
			actual = "exists, provisions from elsewhere"
		}
		if c.Reported != "" {
			actual += " (agent reports " + c.Reported + ")"
		}
		out = append(out, Difference{Node: node, DeviceClass: dc, Desired: c.Name, Actual: actual, Explanation: *c.Topic,
			Health: healthOf(c.Topic.Severity)})
	}
	return out
}

// DeviceClasses returns every device class (v2alpha1 sets and v1alpha1 clusters) with its classes, its
// state on every node and its capacity over all nodes; the ones that differ first.
func DeviceClasses(s *Snapshot) []DeviceClassView {
	return newIndex(s).deviceClasses(nil)
}

// deviceClasses builds the device class views; nodes, when given, are already built node views.
func (x *index) deviceClasses(nodes map[string]*NodeView) []DeviceClassView {
	type key struct{ src, name string }
	views := map[key]*DeviceClassView{}
	var order []key
	add := func(k key, v DeviceClassView) {
		if _, ok := views[k]; !ok {
			views[k] = &v
			order = append(order, k)
		}
	}
	for _, set := range x.s.LVMNodeSets {
		src := Ref{API: apiV2, Kind: "LVMNodeSet", Namespace: set.Namespace, Name: set.Name}
		for _, dc := range set.Spec.Template.DeviceClasses {
			v := DeviceClassView{Name: dc.Name, Source: src, VolumeGroup: dc.VolumeGroup, Strategy: string(dc.Strategy), Default: dc.Default}
			if set.Spec.Provider.Strategy != lvmv2.ProviderUnmanaged {
				if n := v2ClassName(dc.Name, dc.StorageClass); n != "" {
					v.StorageClass = x.checkStorageClass(n, dc.Name, nil, explain.Context{})
				}
				if n := v2SnapshotClassName(dc.Name, dc.SnapshotClass); n != "" && dc.Strategy == lvmv2.StrategyThin {
					v.SnapshotClass = x.checkSnapshotClass(n, nil, explain.Context{})
				}
			}
			add(key{src.String(), dc.Name}, v)
		}
	}
	for _, c := range x.s.LVMClusters {
		src := Ref{API: apiV1, Kind: "LVMCluster", Namespace: c.Namespace, Name: c.Name}
		for _, dc := range c.Spec.Storage.DeviceClasses {
			v := DeviceClassView{Name: dc.Name, Source: src, VolumeGroup: dc.Name, Strategy: "Thick", Default: c.Spec.Storage.IsDefault(dc)}
			v.StorageClass = x.checkStorageClass("lvms-"+dc.Name, dc.Name, nil, explain.Context{})
			if dc.ThinPoolConfig != nil {
				v.Strategy = "Thin"
				v.SnapshotClass = x.checkSnapshotClass("lvms-"+dc.Name, nil, explain.Context{})
			}
			add(key{src.String(), dc.Name}, v)
		}
	}
	for _, name := range x.names {
		nv := nodes[name]
		if nv == nil {
			var ok bool
			if nv, ok = x.node(name, false); !ok {
				continue
			}
		}
		for _, ndc := range nv.DeviceClasses {
			owner := x.ownerOf(nv, ndc.Source, ndc.Name)
			k := key{owner.String(), ndc.Name}
			if _, ok := views[k]; !ok {
				// A node reports a device class whose set or cluster the caller cannot see.
				add(k, DeviceClassView{Name: ndc.Name, Source: owner, VolumeGroup: ndc.VolumeGroup, Strategy: ndc.Strategy,
					StorageClass: ndc.StorageClass, SnapshotClass: ndc.SnapshotClass})
			}
			v := views[k]
			v.Nodes = append(v.Nodes, ndc)
			if ndc.Capacity != nil {
				v.Capacity = addCapacity(v.Capacity, *ndc.Capacity)
			}
		}
	}
	out := make([]DeviceClassView, 0, len(order))
	for _, k := range order {
		v := views[k]
		v.Capacity.DeviceClass, v.Capacity.Strategy = v.Name, v.Strategy
		v.Health = HealthOK
		v.Differences = classDifferences("", v.Name, v.StorageClass, v.SnapshotClass)
		for i := range v.Differences {
			v.Differences[i].DeviceClass = v.Name
		}
		for _, d := range v.Differences {
			v.Health = worse(v.Health, d.Health)
		}
		for _, n := range v.Nodes {
			v.Health = worse(v.Health, n.Health)
		}
		out = append(out, *v)
	}
	slices.SortStableFunc(out, func(a, b DeviceClassView) int {
		if a.Health.Rank() != b.Health.Rank() {
			return b.Health.Rank() - a.Health.Rank()
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Source.String(), b.Source.String())
	})
	return out
}

// ownerOf returns the set or cluster behind a device class reported by a per-node object of a node view:
// among the node's owners of the right kind, the one whose spec has the class.
func (x *index) ownerOf(nv *NodeView, perNode Ref, class string) Ref {
	want := "LVMNodeSet"
	if perNode.API == apiV1 {
		want = "LVMCluster"
	}
	var first *Ref
	for i, o := range nv.Owners {
		if o.Kind != want || o.Namespace != perNode.Namespace {
			continue
		}
		if x.definesClass(o, class) {
			return o
		}
		if first == nil {
			first = &nv.Owners[i]
		}
	}
	// No selecting owner defines it (the node left the set that did): the one of that namespace that does.
	for _, r := range x.definers(want, perNode.Namespace) {
		if x.definesClass(r, class) {
			return r
		}
	}
	if first != nil {
		return *first // the caller cannot see which one defines it
	}
	return perNode
}
