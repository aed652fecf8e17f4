package claims

import (
	"reflect"
	"testing"
	"time"
)

var (
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

func set(name string, created time.Time, nodes []string, vgs ...string) NodeSet {
	return NodeSet{Name: name, Created: created, Nodes: nodes, VolumeGroups: vgs}
}

func TestCompute_NodeSets(t *testing.T) {
	tests := []struct {
		name  string
		in    Input
		wantA Assignment
		wantB Assignment
	}{
		{
			name:  "disjoint nodes",
			in:    Input{NodeSets: []NodeSet{set("a", t0, []string{"n1"}, "vg1"), set("b", t1, []string{"n2"}, "vg1")}},
			wantA: Assignment{Managed: []string{"n1"}},
			wantB: Assignment{Managed: []string{"n2"}},
		},
		{
			name:  "shared node with different volume groups is fine",
			in:    Input{NodeSets: []NodeSet{set("a", t0, []string{"n1"}, "vg1"), set("b", t1, []string{"n1"}, "vg2")}},
			wantA: Assignment{Managed: []string{"n1"}},
			wantB: Assignment{Managed: []string{"n1"}},
		},
		{
			name:  "same volume group on a shared node: the older set keeps it",
			in:    Input{NodeSets: []NodeSet{set("b", t1, []string{"n1", "n2"}, "vg1"), set("a", t0, []string{"n1"}, "vg1")}},
			wantA: Assignment{Managed: []string{"n1"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "b", Overlap: "volume group vg1", Kept: true}}},
			wantB: Assignment{Managed: []string{"n2"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "a", Overlap: "volume group vg1"}}},
		},
		{
			name: "the incumbent keeps the node even when younger",
			in: Input{
				NodeSets:   []NodeSet{set("a", t0, []string{"n1"}, "vg1"), set("b", t1, []string{"n1"}, "vg1")},
				Incumbents: Incumbents{NodeSets: map[string][]string{"n1": {"b"}}},
			},
			wantA: Assignment{Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "b", Overlap: "volume group vg1"}}},
			wantB: Assignment{Managed: []string{"n1"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "a", Overlap: "volume group vg1", Kept: true}}},
		},
		{
			name: "same device, device class, two defaults and different sockets are all named",
			in: Input{NodeSets: []NodeSet{
				{Name: "a", Created: t0, Nodes: []string{"n1"}, VolumeGroups: []string{"vg1"}, Devices: []string{"/dev/sdb", "/dev/sdc"}, DeviceClasses: []string{"fast"}, HasDefault: true},
				{Name: "b", Created: t1, Nodes: []string{"n1"}, VolumeGroups: []string{"vg2"}, Devices: []string{"/dev/sdc"}, DeviceClasses: []string{"fast"}, HasDefault: true, LVMDSocket: "/run/other.sock"},
			}},
			wantA: Assignment{Managed: []string{"n1"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "b", Kept: true,
				Overlap: `device /dev/sdc, device class fast, both have a default device class, different lvmd sockets "/run/topolvm/lvmd.sock" and "/run/other.sock"`}}},
			wantB: Assignment{Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "a",
				Overlap: `device /dev/sdc, device class fast, both have a default device class, different lvmd sockets "/run/topolvm/lvmd.sock" and "/run/other.sock"`}}},
		},
		{
			name:  "explicit default socket equals an unset one",
			in:    Input{NodeSets: []NodeSet{{Name: "a", Created: t0, Nodes: []string{"n1"}, VolumeGroups: []string{"x"}}, {Name: "b", Created: t1, Nodes: []string{"n1"}, VolumeGroups: []string{"y"}, LVMDSocket: DefaultLVMDSocket}}},
			wantA: Assignment{Managed: []string{"n1"}},
			wantB: Assignment{Managed: []string{"n1"}},
		},
		{
			name:  "same creation time: the smaller name keeps the node",
			in:    Input{NodeSets: []NodeSet{set("b", t0, []string{"n1"}, "vg1"), set("a", t0, []string{"n1"}, "vg1")}},
			wantA: Assignment{Managed: []string{"n1"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "b", Overlap: "volume group vg1", Kept: true}}},
			wantB: Assignment{Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "a", Overlap: "volume group vg1"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Compute(tc.in)
			assertAssignment(t, "a", res.NodeSet("a"), tc.wantA)
			assertAssignment(t, "b", res.NodeSet("b"), tc.wantB)
		})
	}
}

func TestCompute_ClusterAndNodeSets(t *testing.T) {
	const both = "managed by both the v1 LVMCluster and a v2 LVMNodeSet"
	tests := []struct {
		name        string
		in          Input
		wantSet     Assignment
		wantCluster Assignment
	}{
		{
			name: "disjoint nodes",
			in: Input{
				NodeSets: []NodeSet{set("s", t1, []string{"n1"}, "vg1")},
				Cluster:  &Cluster{Name: "c", Created: t0, Nodes: []string{"n2"}},
			},
			wantSet:     Assignment{Managed: []string{"n1"}},
			wantCluster: Assignment{Managed: []string{"n2"}},
		},
		{
			name: "older LVMCluster keeps a shared node when nobody manages it yet",
			in: Input{
				NodeSets: []NodeSet{set("s", t1, []string{"n1", "n2"}, "vg9")},
				Cluster:  &Cluster{Name: "c", Created: t0, Nodes: []string{"n1"}},
			},
			wantSet:     Assignment{Managed: []string{"n2"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindCluster, With: "c", Overlap: both}}},
			wantCluster: Assignment{Managed: []string{"n1"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "s", Overlap: both, Kept: true}}},
		},
		{
			name: "a set already managing the node keeps it against an older LVMCluster",
			in: Input{
				NodeSets:   []NodeSet{set("s", t1, []string{"n1"}, "vg9")},
				Cluster:    &Cluster{Name: "c", Created: t0, Nodes: []string{"n1"}},
				Incumbents: Incumbents{NodeSets: map[string][]string{"n1": {"s"}}},
			},
			wantSet:     Assignment{Managed: []string{"n1"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindCluster, With: "c", Overlap: both, Kept: true}}},
			wantCluster: Assignment{Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "s", Overlap: both}}},
		},
		{
			name: "the LVMCluster managing the node keeps it against an older set",
			in: Input{
				NodeSets:   []NodeSet{set("s", t0, []string{"n1"}, "vg9")},
				Cluster:    &Cluster{Name: "c", Created: t1, Nodes: []string{"n1"}},
				Incumbents: Incumbents{Cluster: map[string]bool{"n1": true}},
			},
			wantSet:     Assignment{Conflicts: []Conflict{{Node: "n1", WithKind: KindCluster, With: "c", Overlap: both}}},
			wantCluster: Assignment{Managed: []string{"n1"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "s", Overlap: both, Kept: true}}},
		},
		{
			name: "migration target waits for the hand-over without a conflict",
			in: Input{
				NodeSets: []NodeSet{{Name: "s", Created: t1, Nodes: []string{"n1", "n2"}, VolumeGroups: []string{"vg1"}, MigratedFrom: "c", HandedOver: []string{"n2"}}},
				Cluster:  &Cluster{Name: "c", Created: t0, Nodes: []string{"n1", "n2"}},
			},
			wantSet:     Assignment{Managed: []string{"n2"}, Waiting: []string{"n1"}},
			wantCluster: Assignment{Managed: []string{"n1"}},
		},
		{
			name: "a migration marker naming another LVMCluster does not count",
			in: Input{
				NodeSets: []NodeSet{{Name: "s", Created: t1, Nodes: []string{"n1"}, VolumeGroups: []string{"vg1"}, MigratedFrom: "other", HandedOver: []string{"n1"}}},
				Cluster:  &Cluster{Name: "c", Created: t0, Nodes: []string{"n1"}},
			},
			wantSet:     Assignment{Conflicts: []Conflict{{Node: "n1", WithKind: KindCluster, With: "c", Overlap: both}}},
			wantCluster: Assignment{Managed: []string{"n1"}, Conflicts: []Conflict{{Node: "n1", WithKind: KindNodeSet, With: "s", Overlap: both, Kept: true}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Compute(tc.in)
			assertAssignment(t, "set", res.NodeSet("s"), tc.wantSet)
			assertAssignment(t, "cluster", res.Cluster, tc.wantCluster)
		})
	}
}

func TestCompute_IsOrderIndependent(t *testing.T) {
	a := set("a", t0, []string{"n1", "n2"}, "vg1")
	b := set("b", t1, []string{"n2", "n3"}, "vg1")
	c := set("c", t1, []string{"n3"}, "vg2")
	first := Compute(Input{NodeSets: []NodeSet{a, b, c}})
	second := Compute(Input{NodeSets: []NodeSet{c, b, a}})
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("result depends on input order:\n%+v\n%+v", first, second)
	}
}

func TestConflict_Message(t *testing.T) {
	c := Conflict{Node: "n1", WithKind: KindNodeSet, With: "b", Overlap: "volume group vg1"}
	want := "LVMNodeSet b already manages node n1 (volume group vg1); this object leaves the node alone until the conflict is resolved: change one node selector or rename the overlapping volume groups, devices or device classes"
	if got := c.Message(); got != want {
		t.Errorf("Message() = %q\nwant %q", got, want)
	}
	c.Kept = true
	want = "LVMNodeSet b also claims node n1 (volume group vg1); the node stays managed by this object and b leaves it alone until the conflict is resolved"
	if got := c.Message(); got != want {
		t.Errorf("Message() = %q\nwant %q", got, want)
	}
}

func assertAssignment(t *testing.T, who string, got *Assignment, want Assignment) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no assignment", who)
	}
	norm := func(a Assignment) Assignment {
		if len(a.Managed) == 0 {
			a.Managed = nil
		}
		if len(a.Waiting) == 0 {
			a.Waiting = nil
		}
		if len(a.Conflicts) == 0 {
			a.Conflicts = nil
		}
		return a
	}
	if g, w := norm(*got), norm(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %+v\nwant %+v", who, g, w)
	}
}
