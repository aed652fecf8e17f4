package console

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/nodeselect"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// API group/versions as shown in Refs.
const (
	apiV2      = "lvm.topolvm.io/v2alpha1"
	apiV1      = "lvm.topolvm.io/v1alpha1"
	apiTopoLVM = "topolvm.io/v1"
	apiCore    = "v1"
)

// index is a snapshot with the lookups the views need. Slices keep the snapshot's order, so everything
// built from them is deterministic.
type index struct {
	s            *Snapshot
	nodes        map[string]*corev1.Node
	lvmNodes     map[string][]*lvmv2.LVMNode
	nodeStatuses map[string][]*lvmv1.LVMVolumeGroupNodeStatus
	clustersByNS map[string][]*lvmv1.LVMCluster
	vgsByNS      map[string][]*lvmv1.LVMVolumeGroup
	scs          map[string]*storagev1.StorageClass
	vscs         map[string]*SnapshotClass
	lvsByNode    map[string][]*topolvmv1.LogicalVolume
	vlinks       *volumeLinks
	// names of every node with LVMS state, sorted.
	names []string
	// hostIDs are the nodes per sanlock host ID, built on first use (hostIDHolders).
	hostIDs map[hostIDKey][]string
	// sharedLVs are the names of the LogicalVolumes of the shared driver, by volume group and volume ID.
	sharedLVs map[sharedLVKey]string
	// active are the nodes per shared volume, built on first use (activations).
	active map[sharedLVKey][]Activation
	// setMatchers are the LVMNodeSets' compiled node selectors, by index, built on first use (selectedBy).
	setMatchers []*nodeselect.Matcher
	// What is built on first use is built once: nodes' views are built in parallel (buildOverview).
	vlinksOnce, hostIDsOnce, activeOnce, matchersOnce sync.Once
	// groups are the names of the LogicalVolumeGroupSnapshots, built on first use (isGroupMember).
	groups     map[string]bool
	groupsOnce sync.Once
}

func newIndex(s *Snapshot) *index {
	x := &index{s: s,
		nodes:        make(map[string]*corev1.Node, len(s.Nodes)),
		lvmNodes:     make(map[string][]*lvmv2.LVMNode, len(s.LVMNodes)),
		nodeStatuses: make(map[string][]*lvmv1.LVMVolumeGroupNodeStatus, len(s.NodeStatuses)),
		clustersByNS: map[string][]*lvmv1.LVMCluster{},
		vgsByNS:      map[string][]*lvmv1.LVMVolumeGroup{},
		scs:          make(map[string]*storagev1.StorageClass, len(s.StorageClasses)),
		vscs:         make(map[string]*SnapshotClass, len(s.SnapshotClasses)),
		lvsByNode:    map[string][]*topolvmv1.LogicalVolume{},
		sharedLVs:    map[sharedLVKey]string{},
	}
	for i := range s.Nodes {
		x.nodes[s.Nodes[i].Name] = &s.Nodes[i]
	}
	seen := map[string]bool{}
	addName := func(n string) {
		if !seen[n] {
			seen[n] = true
			x.names = append(x.names, n)
		}
	}
	for i := range s.LVMNodes {
		n := &s.LVMNodes[i]
		x.lvmNodes[n.Name] = append(x.lvmNodes[n.Name], n)
		addName(n.Name)
	}
	for i := range s.NodeStatuses {
		n := &s.NodeStatuses[i]
		x.nodeStatuses[n.Name] = append(x.nodeStatuses[n.Name], n)
		addName(n.Name)
	}
	slices.Sort(x.names)
	for i := range s.LVMClusters {
		c := &s.LVMClusters[i]
		x.clustersByNS[c.Namespace] = append(x.clustersByNS[c.Namespace], c)
	}
	for i := range s.LVMVolumeGroups {
		g := &s.LVMVolumeGroups[i]
		x.vgsByNS[g.Namespace] = append(x.vgsByNS[g.Namespace], g)
	}
	for i := range s.StorageClasses {
		x.scs[s.StorageClasses[i].Name] = &s.StorageClasses[i]
	}
	for i := range s.SnapshotClasses {
		x.vscs[s.SnapshotClasses[i].Name] = &s.SnapshotClasses[i]
	}
	for i := range s.LogicalVolumes {
		lv := &s.LogicalVolumes[i]
		x.lvsByNode[lv.Spec.NodeName] = append(x.lvsByNode[lv.Spec.NodeName], lv)
		if vg := sharedVolumeGroup(lv); vg != "" && lv.Status.VolumeID != "" {
			x.sharedLVs[sharedLVKey{vg, lv.Status.VolumeID}] = lv.Name
		}
	}
	return x
}

// hasNode reports whether the node exists; when Nodes are hidden from the caller it is assumed to.
func (x *index) hasNode(name string) bool {
	if x.s.IsHidden("nodes") {
		return true
	}
	_, ok := x.nodes[name]
	return ok
}

// v1Classes returns the v1alpha1 device classes that apply to a node status: those of the LVMClusters in
// its namespace whose node selector matches the node (when the node's labels are visible), or, without a
// visible LVMCluster, those of the LVMVolumeGroups.
func (x *index) v1Classes(ns *lvmv1.LVMVolumeGroupNodeStatus) ([]lvmv1.DeviceClass, []Ref) {
	node, known := x.nodes[ns.Name]
	var out []lvmv1.DeviceClass
	var owners []Ref
	clusters := x.clustersByNS[ns.Namespace]
	for _, c := range clusters {
		var classes []lvmv1.DeviceClass
		for _, dc := range c.Spec.Storage.DeviceClasses {
			if !known {
				classes = append(classes, dc)
			} else if ok, _ := nodeselect.Eligible(node, dc.NodeSelector, c.Spec.Tolerations); ok {
				classes = append(classes, dc)
			}
		}
		if len(classes) > 0 || !known {
			owners = append(owners, Ref{API: apiV1, Kind: "LVMCluster", Namespace: c.Namespace, Name: c.Name})
			out = append(out, classes...)
		}
	}
	if len(clusters) > 0 {
		return out, owners
	}
	for _, g := range x.vgsByNS[ns.Namespace] {
		if known && !nodeselect.Matches(g.Spec.NodeSelector, node) {
			continue
		}
		out = append(out, lvmv1.DeviceClass{Name: g.Name, DeviceSelector: g.Spec.DeviceSelector, NodeSelector: g.Spec.NodeSelector,
			ThinPoolConfig: g.Spec.ThinPoolConfig, Default: g.Spec.Default, DeviceAccessPolicy: g.Spec.DeviceAccessPolicy,
			FilesystemType: g.Spec.FilesystemType})
		owners = appendRef(owners, ownerRef(g.OwnerReferences, g.Namespace, "LVMCluster", apiV1))
	}
	return out, owners
}

// ownerRef returns the first owner of the given kind as a Ref (zero Ref if none).
func ownerRef(refs []metav1.OwnerReference, ns, kind, api string) Ref {
	for _, o := range refs {
		if o.Kind == kind {
			return Ref{API: api, Kind: kind, Namespace: ns, Name: o.Name}
		}
	}
	return Ref{}
}

func appendRef(refs []Ref, r Ref) []Ref {
	if r.Name == "" || slices.Contains(refs, r) {
		return refs
	}
	return append(refs, r)
}
