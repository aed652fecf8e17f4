package analyze

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/operator/inventory"
)

// input is a bundle with the lookups the checks share.
type input struct {
	b    *bundle.Bundle
	snap *console.Snapshot
	at   time.Time
	// names of the nodes with LVMS state, sorted; views by name.
	names []string
	views map[string]*console.NodeView

	csiDrivers []*storagev1.CSIDriver
	csiNodes   map[string]*storagev1.CSINode
	capacities []*storagev1.CSIStorageCapacity
	pods       []*corev1.Pod
	// inventories per namespace holding LVMNodeSets or LVMClusters, sorted by namespace, as the operator
	// builds them (node selection with taints and tolerations).
	inventories []*inventory.Inventory
	// collected says whether the bundle holds a resource (its collector ran without error).
	collected map[string]bool
}

func newInput(b *bundle.Bundle) *input {
	in := &input{b: b, snap: b.Snapshot(), at: b.Manifest.Started, views: map[string]*console.NodeView{},
		csiNodes: map[string]*storagev1.CSINode{}, collected: map[string]bool{}}
	for _, o := range b.Objects {
		switch o := o.(type) {
		case *storagev1.CSIDriver:
			in.csiDrivers = append(in.csiDrivers, o)
		case *storagev1.CSINode:
			in.csiNodes[o.Name] = o
		case *storagev1.CSIStorageCapacity:
			in.capacities = append(in.capacities, o)
		case *corev1.Pod:
			in.pods = append(in.pods, o)
		}
	}
	for _, c := range b.Manifest.Collectors {
		in.collected[c.Name] = c.Error == ""
	}
	for _, n := range console.BuildOverview(in.snap).Nodes {
		in.names = append(in.names, n.Name)
	}
	slices.Sort(in.names)
	for _, name := range in.names {
		if v, err := console.Node(in.snap, name); err == nil {
			in.views[name] = v
		}
	}
	in.inventories = inventories(in.snap)
	return in
}

// ran reports whether the named collector ran without error (true for a bundle that does not list
// collectors, such as a hand-made one).
func (in *input) ran(name string) bool {
	if len(in.b.Manifest.Collectors) == 0 {
		return true
	}
	return in.collected[name]
}

// inventories builds the operator's picture of every namespace holding an LVMNodeSet or LVMCluster.
func inventories(s *console.Snapshot) []*inventory.Inventory {
	var nss []string
	for _, set := range s.LVMNodeSets {
		nss = append(nss, set.Namespace)
	}
	for _, c := range s.LVMClusters {
		nss = append(nss, c.Namespace)
	}
	slices.Sort(nss)
	nss = slices.Compact(nss)
	r := snapshotReader{s: s}
	var out []*inventory.Inventory
	for _, ns := range nss {
		if inv, err := inventory.Observe(context.Background(), r, ns); err == nil {
			out = append(out, inv)
		}
	}
	return out
}

// snapshotReader lists the kinds inventory.Observe reads from a snapshot. It copies items, as a cache
// reader does, so the snapshot is never changed.
type snapshotReader struct{ s *console.Snapshot }

var _ client.Reader = snapshotReader{}

func (r snapshotReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("a bundle snapshot serves lists only")
}

func (r snapshotReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	ns := lo.Namespace
	switch l := list.(type) {
	case *corev1.NodeList:
		l.Items = slices.Clone(r.s.Nodes)
	case *lvmv2.LVMNodeSetList:
		l.Items = inNamespace(r.s.LVMNodeSets, ns)
	case *lvmv2.LVMNodeList:
		l.Items = inNamespace(r.s.LVMNodes, ns)
	case *lvmv1.LVMClusterList:
		l.Items = inNamespace(r.s.LVMClusters, ns)
	case *lvmv1.LVMVolumeGroupNodeStatusList:
		l.Items = inNamespace(r.s.NodeStatuses, ns)
	default:
		return fmt.Errorf("a bundle snapshot does not list %T", list)
	}
	return nil
}

func inNamespace[T any, P interface {
	*T
	GetNamespace() string
}](items []T, ns string) []T {
	var out []T
	for i := range items {
		if ns == "" || P(&items[i]).GetNamespace() == ns {
			out = append(out, items[i])
		}
	}
	return out
}

// selectedNodes returns every node an LVMNodeSet or LVMCluster selects, with the objects selecting it.
func (in *input) selectedNodes() map[string][]Object {
	out := map[string][]Object{}
	for _, inv := range in.inventories {
		for _, s := range inv.NodeSets {
			for _, n := range inv.Selected[s.Name] {
				out[n] = append(out[n], Object{APIVersion: lvmv2.GroupVersion.String(), Kind: "LVMNodeSet", Namespace: s.Namespace, Name: s.Name})
			}
		}
		if inv.Active != nil {
			for _, n := range inv.ClusterNodes {
				out[n] = append(out[n], Object{APIVersion: lvmv1.GroupVersion.String(), Kind: "LVMCluster", Namespace: inv.Active.Namespace, Name: inv.Active.Name})
			}
		}
	}
	return out
}

// nodeObject is the per-node object of a node view (its LVMNode, else its LVMVolumeGroupNodeStatus).
func nodeObject(v *console.NodeView) *Object {
	if len(v.Objects) == 0 {
		return &Object{APIVersion: "v1", Kind: "Node", Name: v.Name}
	}
	r := v.Objects[0].Ref
	return &Object{APIVersion: r.API, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

func refObject(r console.Ref) *Object {
	return &Object{APIVersion: r.API, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}
