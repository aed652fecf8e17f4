package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/nodeselect"
	"github.com/lvms-dev/lvms/operator/claims"
	"github.com/lvms-dev/lvms/operator/names"
)

// Inventory is one namespace as the cache shows it. Maps are keyed by name; slices are sorted by name
// unless said otherwise. Nodes and LVMNodes are the cache's own objects (not copies, which would cost most
// of a reconcile on large clusters): read them, never modify them; DeepCopy first.
type Inventory struct {
	Namespace string
	// Nodes by name, and their names sorted.
	Nodes     map[string]*corev1.Node
	NodeNames []string
	// NodeSets sorted by name, with the nodes each selects and selector errors.
	NodeSets  []*lvmv2.LVMNodeSet
	Selected  map[string][]string
	SelectErr map[string]error
	// Clusters sorted oldest first; Active is the first (the one LVMS manages), the rest are refused.
	Clusters []*lvmv1.LVMCluster
	Active   *lvmv1.LVMCluster
	// ClassNodes maps each device class of the active cluster to the nodes it selects; ClusterNodes is
	// their union, sorted. ClusterSelectErr holds selector errors by device class.
	ClassNodes       map[string][]string
	ClusterNodes     []string
	ClusterSelectErr map[string]error
	// LVMNodes and NodeStatuses of the namespace by name (= node name).
	LVMNodes     map[string]*lvmv2.LVMNode
	NodeStatuses map[string]*lvmv1.LVMVolumeGroupNodeStatus
}

// Observe reads the inventory of namespace.
func Observe(ctx context.Context, c client.Reader, namespace string) (*Inventory, error) {
	inv, err := ObserveClaimants(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	inv.Nodes = make(map[string]*corev1.Node, len(nodes.Items))
	inv.NodeNames = make([]string, 0, len(nodes.Items))
	for i := range nodes.Items {
		n := &nodes.Items[i]
		inv.Nodes[n.Name] = n
		inv.NodeNames = append(inv.NodeNames, n.Name)
	}
	slices.Sort(inv.NodeNames)
	for _, s := range inv.NodeSets {
		inv.Selected[s.Name], inv.SelectErr[s.Name] = inv.selectNodes(s.Spec.NodeSelector, s.Spec.Tolerations)
	}
	if inv.Active != nil {
		inv.observeCluster(inv.Active)
	}

	var lvmNodes lvmv2.LVMNodeList
	if err := c.List(ctx, &lvmNodes, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list LVMNodes in %s: %w", namespace, err)
	}
	inv.LVMNodes = make(map[string]*lvmv2.LVMNode, len(lvmNodes.Items))
	for i := range lvmNodes.Items {
		inv.LVMNodes[lvmNodes.Items[i].Name] = &lvmNodes.Items[i]
	}
	var statuses lvmv1.LVMVolumeGroupNodeStatusList
	if err := c.List(ctx, &statuses, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list LVMVolumeGroupNodeStatuses in %s: %w", namespace, err)
	}
	for i := range statuses.Items {
		inv.NodeStatuses[statuses.Items[i].Name] = &statuses.Items[i]
	}
	return inv, nil
}

// ObserveClaimants reads only the LVMNodeSets and LVMClusters of namespace (NodeSets, Clusters, Active):
// no Nodes, LVMNodes or statuses, and no selection, whose cost grows with the cluster. The other maps are
// empty.
func ObserveClaimants(ctx context.Context, c client.Reader, namespace string) (*Inventory, error) {
	inv := &Inventory{
		Namespace:        namespace,
		Nodes:            map[string]*corev1.Node{},
		Selected:         map[string][]string{},
		SelectErr:        map[string]error{},
		ClassNodes:       map[string][]string{},
		ClusterSelectErr: map[string]error{},
		LVMNodes:         map[string]*lvmv2.LVMNode{},
		NodeStatuses:     map[string]*lvmv1.LVMVolumeGroupNodeStatus{},
	}
	var sets lvmv2.LVMNodeSetList
	if err := c.List(ctx, &sets, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list LVMNodeSets in %s: %w", namespace, err)
	}
	for i := range sets.Items {
		inv.NodeSets = append(inv.NodeSets, &sets.Items[i])
	}
	slices.SortFunc(inv.NodeSets, func(a, b *lvmv2.LVMNodeSet) int { return strings.Compare(a.Name, b.Name) })

	var clusters lvmv1.LVMClusterList
	if err := c.List(ctx, &clusters, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list LVMClusters in %s: %w", namespace, err)
	}
	for i := range clusters.Items {
		inv.Clusters = append(inv.Clusters, &clusters.Items[i])
	}
	slices.SortFunc(inv.Clusters, func(a, b *lvmv1.LVMCluster) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(inv.Clusters) > 0 {
		inv.Active = inv.Clusters[0]
	}
	return inv, nil
}

func (inv *Inventory) selectNodes(sel *corev1.NodeSelector, tolerations []corev1.Toleration) ([]string, error) {
	m, err := nodeselect.NewMatcher(sel, tolerations)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range inv.NodeNames {
		if m.Eligible(inv.Nodes[name]) {
			out = append(out, name)
		}
	}
	return out, nil
}

func (inv *Inventory) observeCluster(c *lvmv1.LVMCluster) {
	union := map[string]bool{}
	if c.Spec.ConfigurationPolicy == lvmv1.ConfigurationPolicyExternal {
		nodes, err := inv.selectNodes(nil, c.Spec.Tolerations)
		if err != nil {
			inv.ClusterSelectErr[""] = err
		}
		for _, n := range nodes {
			union[n] = true
		}
	}
	for _, dc := range c.Spec.Storage.DeviceClasses {
		nodes, err := inv.selectNodes(dc.NodeSelector, c.Spec.Tolerations)
		if err != nil {
			inv.ClusterSelectErr[dc.Name] = err
			continue
		}
		inv.ClassNodes[dc.Name] = nodes
		for _, n := range nodes {
			union[n] = true
		}
	}
	for n := range union {
		inv.ClusterNodes = append(inv.ClusterNodes, n)
	}
	slices.Sort(inv.ClusterNodes)
}

// NodeSetOwners returns the names of the LVMNodeSets among the owners of an LVMNode, sorted.
func NodeSetOwners(n *lvmv2.LVMNode) []string {
	var out []string
	for _, ref := range n.OwnerReferences {
		if ref.Kind == names.KindNodeSet && strings.HasPrefix(ref.APIVersion, lvmv2.GroupVersion.Group+"/") {
			out = append(out, ref.Name)
		}
	}
	slices.Sort(out)
	return out
}

// ClaimsInput is the inventory as claims.Compute needs it.
func (inv *Inventory) ClaimsInput() claims.Input {
	in := claims.Input{Incumbents: claims.Incumbents{NodeSets: map[string][]string{}, Cluster: map[string]bool{}}}
	for _, s := range inv.NodeSets {
		in.NodeSets = append(in.NodeSets, NodeSetClaim(s, inv.Selected[s.Name]))
	}
	if inv.Active != nil {
		in.Cluster = &claims.Cluster{Name: inv.Active.Name, Created: inv.Active.CreationTimestamp.Time, Nodes: inv.ClusterNodes}
		for name, st := range inv.NodeStatuses {
			for _, ref := range st.OwnerReferences {
				if ref.UID == inv.Active.UID {
					in.Incumbents.Cluster[name] = true
				}
			}
		}
	}
	for name, n := range inv.LVMNodes {
		if owners := NodeSetOwners(n); len(owners) > 0 {
			in.Incumbents.NodeSets[name] = owners
		}
	}
	return in
}

// NodeSetClaim is what set claims on the given nodes.
func NodeSetClaim(set *lvmv2.LVMNodeSet, nodes []string) claims.NodeSet {
	t := set.Spec.Template
	c := claims.NodeSet{
		Name:         set.Name,
		Created:      set.CreationTimestamp.Time,
		Nodes:        nodes,
		MigratedFrom: set.Annotations[names.MigratedFromAnnotation],
		HandedOver:   names.HandedOverNodes(set.Annotations),
	}
	if t.LVMD != nil {
		c.LVMDSocket = t.LVMD.SocketName
	}
	for _, vg := range t.VolumeGroups {
		c.VolumeGroups = append(c.VolumeGroups, vg.Name)
		c.Devices = append(c.Devices, ExplicitDevices(vg)...)
	}
	for _, dc := range t.DeviceClasses {
		c.DeviceClasses = append(c.DeviceClasses, dc.Name)
		c.HasDefault = c.HasDefault || dc.Default
	}
	return c
}

// ExplicitDevices returns the device paths a volume group's selector names explicitly (kname or path with
// operator In), sorted and without duplicates.
func ExplicitDevices(vg lvmv2.VolumeGroup) []string {
	var out []string
	for _, term := range vg.DeviceSelector.DeviceSelectorTerms {
		for _, e := range term.MatchExpressions {
			if (e.Key == lvmv2.KeyKName || e.Key == lvmv2.KeyPath) && e.Operator == lvmv2.OpIn {
				out = append(out, e.Values...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
