package console

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// sandboxOwners is the sandbox of issue 23: nodes 1 and 2 labelled api=v2, node 2 also fast=true, node 3
// api=v1; LVMNodeSet "volumes" selects api=v2 (class vg1), LVMNodeSet "thin" selects fast=true (class fast),
// LVMCluster "sandbox" selects api=v1. Every node has an LVMVolumeGroupNodeStatus (the agent writes one
// everywhere); nodes 1 and 2 have an LVMNode owned by "volumes", node 2's also carries the class of "thin".
func sandboxOwners() *Snapshot {
	const ns = "openshift-storage"
	sel := func(key, value string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}}
	}
	node := func(name string, labels map[string]string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	set := func(name string, s *corev1.NodeSelector, class string) lvmv2.LVMNodeSet {
		return lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: lvmv2.LVMNodeSetSpec{NodeSelector: s,
			Template: lvmv2.LVMNodeSpec{DeviceClasses: []lvmv2.DeviceClass{{Name: class, VolumeGroup: "vg-" + class, Strategy: lvmv2.StrategyThick}}}}}
	}
	lvmNode := func(name string, classes ...string) lvmv2.LVMNode {
		n := lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNodeSet", Name: "volumes", Controller: ptr.To(true)}}}}
		for _, c := range classes {
			n.Spec.DeviceClasses = append(n.Spec.DeviceClasses, lvmv2.DeviceClass{Name: c, VolumeGroup: "vg-" + c, Strategy: lvmv2.StrategyThick})
			n.Status.DeviceClasses = append(n.Status.DeviceClasses, lvmv2.DeviceClassStatus{Name: c, VolumeGroup: "vg-" + c, State: lvmv2.StateHealthy})
		}
		n.Status.State = lvmv2.StateReady
		return n
	}
	status := func(name string) lvmv1.LVMVolumeGroupNodeStatus {
		return lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	}
	return &Snapshot{At: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), Installed: true,
		Nodes: []corev1.Node{
			node("node-1", map[string]string{"lvms.local/api": "v2"}),
			node("node-2", map[string]string{"lvms.local/api": "v2", "lvms.local/fast": "true"}),
			node("node-3", map[string]string{"lvms.local/api": "v1"}),
			node("node-4", map[string]string{}),
		},
		LVMNodeSets: []lvmv2.LVMNodeSet{set("volumes", sel("lvms.local/api", "v2"), "vg1"), set("thin", sel("lvms.local/fast", "true"), "fast")},
		LVMClusters: []lvmv1.LVMCluster{{ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: ns}, Spec: lvmv1.LVMClusterSpec{
			Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{{Name: "legacy", NodeSelector: sel("lvms.local/api", "v1")}}}}}},
		LVMNodes:     []lvmv2.LVMNode{lvmNode("node-1", "vg1"), lvmNode("node-2", "vg1", "fast"), lvmNode("node-4", "vg1")},
		NodeStatuses: []lvmv1.LVMVolumeGroupNodeStatus{status("node-1"), status("node-2"), status("node-3")},
	}
}

// Owners are the sets and clusters whose selector and tolerations select the node, whatever objects exist
// for it; a node with LVMS state that nothing selects says so.
func TestNode_OwnersAreWhatTheSelectorsSelect(t *testing.T) {
	s := sandboxOwners()
	names := func(refs []Ref) []string {
		var out []string
		for _, r := range refs {
			out = append(out, r.Kind+" "+r.Name)
		}
		return out
	}
	for node, want := range map[string][]string{
		"node-1": {"LVMNodeSet volumes"},
		"node-2": {"LVMNodeSet volumes", "LVMNodeSet thin"},
		"node-3": {"LVMCluster sandbox"},
		"node-4": nil,
	} {
		v, err := Node(s, node)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(v.Owners); !slices.Equal(got, want) {
			t.Errorf("%s owners = %v, want %v", node, got, want)
		}
		notSelected := slices.ContainsFunc(v.Differences, func(d Difference) bool { return d.Explanation.Code == "NodeNotSelected" })
		if notSelected != (want == nil) {
			t.Errorf("%s: NodeNotSelected difference = %v, want %v", node, notSelected, want == nil)
		}
	}
	// Tainted: the set selects a node only with a toleration, as the operator decides.
	s.Nodes[0].Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	if v, _ := Node(s, "node-1"); len(v.Owners) != 0 {
		t.Errorf("tainted node-1 owners = %v, want none without a toleration", names(v.Owners))
	}
	s.LVMNodeSets[0].Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	if v, _ := Node(s, "node-1"); !slices.Equal(names(v.Owners), []string{"LVMNodeSet volumes"}) {
		t.Errorf("tolerated node-1 owners = %v", names(v.Owners))
	}
}

// Each device class is listed once, under the set that defines it.
func TestDeviceClasses_AttributedToTheSetThatDefinesThem(t *testing.T) {
	got := map[string][]string{}
	for _, dc := range DeviceClasses(sandboxOwners()) {
		got[dc.Name] = append(got[dc.Name], dc.Source.Kind+" "+dc.Source.Name)
	}
	for class, want := range map[string][]string{"fast": {"LVMNodeSet thin"}, "vg1": {"LVMNodeSet volumes"}, "legacy": {"LVMCluster sandbox"}} {
		if !slices.Equal(got[class], want) {
			t.Errorf("class %s listed under %v, want %v", class, got[class], want)
		}
	}
}

// A disk named by its /dev/disk/by-id link is one row under that name with its kernel device, state and
// reasons, found through the links the agent reports; a named link no device has is missing, not a guess.
func TestNode_NamedDisksFoundByTheirLinks(t *testing.T) {
	s := sandboxOwners()
	const linkA, linkB, linkGone = "/dev/disk/by-id/lvms-local-disk-a", "/dev/disk/by-id/lvms-local-disk-b", "/dev/disk/by-id/lvms-local-disk-z"
	n := &s.LVMNodes[1] // node-2
	n.Spec.VolumeGroups = []lvmv2.VolumeGroup{{Name: "vg-data", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
		{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{linkA, linkB, linkGone}}}}}}}}
	n.Status.VolumeGroups = []lvmv2.VolumeGroupStatus{{Name: "vg-data", State: lvmv2.StateHealthy, Devices: lvmv2.Devices{
		Included: []lvmv2.Device{{KName: "/dev/loop3", Path: linkB, Links: []string{linkB}}},
		Excluded: []lvmv2.ExcludedDevice{{KName: "/dev/loop2", Links: []string{linkA, "/dev/disk/by-path/virtio-pci-0000:00:05.0"},
			Reasons: []string{"/dev/loop2 has an invalid filesystem signature (xfs) and cannot be used"}, ReasonCodes: []string{"ForeignSignature"}}}}}}
	v, err := Node(s, "node-2")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]DeviceRow{}
	for _, g := range v.VolumeGroups {
		for _, r := range g.Devices {
			rows[r.KName] = r
		}
	}
	if len(rows) != 3 {
		t.Fatalf("rows %+v, want /dev/loop2, /dev/loop3 and the missing link", rows)
	}
	if r := rows["/dev/loop2"]; r.Path != linkA || r.State != DeviceExcluded || r.Desired != "named in selector" || len(r.Reasons) != 1 {
		t.Errorf("disk a: %+v, want the named link on the excluded /dev/loop2 with its reason", r)
	}
	if r := rows["/dev/loop3"]; r.Path != linkB || r.State != DeviceInVG {
		t.Errorf("disk b: %+v", r)
	}
	if r := rows[linkGone]; r.State != DeviceMissing || !r.Differs {
		t.Errorf("a named link no device has: %+v, want missing", r)
	}
	for _, r := range rows {
		if strings.Contains(r.Desired, "maybe") || r.State == DeviceUnresolved {
			t.Errorf("row %s guesses: %+v", r.KName, r)
		}
	}
}

// A device a selector term picked (not by name) says which term.
func TestNode_DeviceSaysWhichSelectorTermPickedIt(t *testing.T) {
	s := sandboxOwners()
	n := &s.LVMNodes[0]
	n.Spec.VolumeGroups = []lvmv2.VolumeGroup{{Name: "vg-vg1", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
		{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyType, Operator: lvmv2.OpIn, Values: []string{"part"}}}},
		{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyType, Operator: lvmv2.OpIn, Values: []string{"disk"}}}}}}}}
	n.Status.VolumeGroups = []lvmv2.VolumeGroupStatus{{Name: "vg-vg1", State: lvmv2.StateHealthy,
		Devices: lvmv2.Devices{Included: []lvmv2.Device{{KName: "/dev/sdb", SelectorTerm: 2}}}}}
	v, err := Node(s, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if d := v.VolumeGroups[0].Devices[0]; d.Desired != "matched by selector term 2" {
		t.Errorf("desired = %q", d.Desired)
	}
}
