package desired

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/selector"
)

// Source says which API object a volume group or device class comes from.
type Source string

// Sources.
const (
	SourceLVMNode        Source = "LVMNode"
	SourceLVMVolumeGroup Source = "LVMVolumeGroup"
)

// Defaults LVMS applies when the API leaves a value out.
const (
	DefaultSizePercent        = 90
	DefaultOverprovisionRatio = 10
	// A pool 80% full grows by 20% into the volume group's free space (v1 has no fields for it).
	DefaultAutoextendThreshold = 80
	DefaultAutoextendPercent   = 20
	DefaultV1ChunkSize         = 128 << 10 // v1 chunkSizeCalculationPolicy Static without chunkSize
	DefaultV1MetadataSize      = 1 << 30   // v1 metadataSizeCalculationPolicy Static without metadataSize
	DefaultSocketName          = "/run/topolvm/lvmd.sock"
)

// Node is the desired storage of one node.
type Node struct {
	// Generation of the LVMNode the spec came from (0 without one).
	Generation int64
	// VolumeGroups: the LVMNode's in spec order, then v1 ones by name.
	VolumeGroups []VolumeGroup
	// DeviceClasses in the same order as their sources.
	DeviceClasses []DeviceClass
	// SocketName of lvmd.
	SocketName string
	// External is true when an LVMCluster says configurationPolicy: ExternalConfiguration: the agent
	// reads the host's lvmd.yaml and manages no volume groups.
	External bool
}

// VolumeGroup is one desired volume group.
type VolumeGroup struct {
	Name   string
	Source Source
	// Object is the name of the API object it comes from (LVMNode or LVMVolumeGroup).
	Object string
	// Selector picks its devices; nil when SelectorError says why the selector cannot be used.
	Selector      *selector.Selector
	SelectorError string
	// ForceWipe: forceWipeDevicesAndDestroyAllData.
	ForceWipe bool
	// Shared: a shared volume group (lvmlockd), handled by the shared-VG path.
	Shared bool
	// StaticDiscovery: no new devices once the volume group exists.
	StaticDiscovery bool
	// DiscoveryPolicy as v1 status reports it.
	DiscoveryPolicy lvmv1.DeviceDiscoveryPolicyStatus
	// Deleting: the object is being deleted; remove the volume group if nothing is left in it.
	Deleting bool
	// ThinPools of the thin device classes on the volume group, sorted by name, each once.
	ThinPools []ThinPool
}

// ThinPool is a desired thin pool.
type ThinPool struct {
	Name               string
	SizePercent        int
	OverprovisionRatio float64
	// ChunkSize in bytes; 0 lets lvm2 choose.
	ChunkSize uint64
	// MetadataSize in bytes; 0 lets lvm2 choose (and grow it with the pool).
	MetadataSize uint64
	// AutoextendThreshold is the data percent at which the agent grows the pool (100: never).
	AutoextendThreshold int
	// AutoextendPercent is how much of its size the pool grows by.
	AutoextendPercent int
	// DataUsageThreshold and MetadataUsageThreshold (percent): at them no new volume is placed on the pool.
	DataUsageThreshold, MetadataUsageThreshold int
}

// DeviceClass is a desired device class.
type DeviceClass struct {
	Name        string
	VolumeGroup string
	Source      Source
	Default     bool
	// Thin is the pool of a thin class, nil for thick.
	Thin *ThinPool
	// LVCreateOptions for every volume (RAID classes).
	LVCreateOptions []string
	// SpareGB for lvmd (nil leaves TopoLVM's default).
	SpareGB *uint64
	FSType  string
	// Needs are the device-mapper targets the class's volumes need.
	Needs []string
}

// VolumeGroup returns the named desired volume group.
func (n *Node) VolumeGroup(name string) (*VolumeGroup, bool) {
	for i := range n.VolumeGroups {
		if n.VolumeGroups[i].Name == name {
			return &n.VolumeGroups[i], true
		}
	}
	return nil, false
}

// FromLVMNode builds the desired state from a v2alpha1 LVMNode.
func FromLVMNode(n *lvmv2.LVMNode) *Node {
	out := &Node{Generation: n.Generation, SocketName: DefaultSocketName}
	if n.Spec.LVMD != nil && n.Spec.LVMD.SocketName != "" {
		out.SocketName = n.Spec.LVMD.SocketName
	}
	deleting := n.DeletionTimestamp != nil
	for _, vg := range n.Spec.VolumeGroups {
		d := VolumeGroup{
			Name: vg.Name, Source: SourceLVMNode, Object: n.Name,
			ForceWipe: vg.ForceWipeDevicesAndDestroyAllData != nil && *vg.ForceWipeDevicesAndDestroyAllData,
			Shared:    vg.AccessPolicy == lvmv2.AccessPolicyShared, Deleting: deleting,
		}
		sel, err := selector.FromV2(vg.DeviceSelector)
		if err != nil {
			d.SelectorError = fmt.Sprintf("the device selector of volume group %s cannot be used: %v", vg.Name, err)
		} else {
			d.Selector = sel
			if d.ForceWipe && !sel.Explicit() {
				d.SelectorError = fmt.Sprintf("volume group %s sets forceWipeDevicesAndDestroyAllData but a deviceSelectorTerm does not name its devices (path or kname with In): LVMS never wipes devices it found by pattern", vg.Name)
				d.Selector = nil
			}
		}
		out.VolumeGroups = append(out.VolumeGroups, d)
	}
	for _, dc := range n.Spec.DeviceClasses {
		c := DeviceClass{Name: dc.Name, VolumeGroup: dc.VolumeGroup, Source: SourceLVMNode, Default: dc.Default,
			FSType: string(dc.FilesystemType), Needs: []string{"linear", "striped"}}
		if dc.Strategy == lvmv2.StrategyThin && dc.Thin != nil {
			tp := ThinPool{Name: dc.Thin.PoolName, SizePercent: int(dc.Thin.SizePercent), OverprovisionRatio: float64(dc.Thin.OverprovisionRatio),
				AutoextendThreshold: int(dc.Thin.AutoextendThreshold), AutoextendPercent: int(dc.Thin.AutoextendPercent),
				DataUsageThreshold: int(dc.Thin.DataUsageThreshold), MetadataUsageThreshold: int(dc.Thin.MetadataUsageThreshold)}
			if dc.Thin.ChunkSize != nil {
				tp.ChunkSize = uint64(dc.Thin.ChunkSize.Value())
			}
			if dc.Thin.MetadataSize != nil {
				tp.MetadataSize = uint64(dc.Thin.MetadataSize.Value())
			}
			tp = withPoolDefaults(tp)
			c.Thin = &tp
			c.Needs = []string{"thin-pool", "thin"}
		} else {
			zero := uint64(0)
			c.SpareGB = &zero
		}
		out.DeviceClasses = append(out.DeviceClasses, c)
	}
	attachPools(out)
	return out
}

func withPoolDefaults(tp ThinPool) ThinPool {
	if tp.SizePercent <= 0 {
		tp.SizePercent = DefaultSizePercent
	}
	if tp.OverprovisionRatio <= 0 {
		tp.OverprovisionRatio = DefaultOverprovisionRatio
	}
	if tp.AutoextendThreshold <= 0 {
		tp.AutoextendThreshold = DefaultAutoextendThreshold
	}
	if tp.AutoextendPercent <= 0 {
		tp.AutoextendPercent = DefaultAutoextendPercent
	}
	if tp.DataUsageThreshold <= 0 || tp.DataUsageThreshold > 100 {
		tp.DataUsageThreshold = int(lvmd.DefaultDataUsageThreshold)
	}
	if tp.MetadataUsageThreshold <= 0 || tp.MetadataUsageThreshold > 100 {
		tp.MetadataUsageThreshold = int(lvmd.DefaultMetadataUsageThreshold)
	}
	return tp
}

// attachPools copies each thin class's pool to its volume group.
func attachPools(n *Node) {
	for _, dc := range n.DeviceClasses {
		if dc.Thin == nil {
			continue
		}
		vg, ok := n.VolumeGroup(dc.VolumeGroup)
		if !ok || slices.ContainsFunc(vg.ThinPools, func(p ThinPool) bool { return p.Name == dc.Thin.Name }) {
			continue
		}
		vg.ThinPools = append(vg.ThinPools, *dc.Thin)
		slices.SortFunc(vg.ThinPools, func(a, b ThinPool) int { return strings.Compare(a.Name, b.Name) })
	}
}

// V1Inputs are the v1alpha1 objects of the agent's namespace.
type V1Inputs struct {
	// Node is the agent's node (for nodeSelector matching).
	Node *corev1.Node
	// VolumeGroups are every LVMVolumeGroup in the namespace.
	VolumeGroups []lvmv1.LVMVolumeGroup
	// Clusters are the LVMClusters in the namespace.
	Clusters []lvmv1.LVMCluster
}

// FromV1 builds the desired state from the LVMVolumeGroups whose nodeSelector matches the node, and the
// LVMCluster's configurationPolicy. Volume groups are sorted by name.
func FromV1(in V1Inputs) *Node {
	out := &Node{SocketName: DefaultSocketName}
	for _, c := range in.Clusters {
		if c.Spec.ConfigurationPolicy == lvmv1.ConfigurationPolicyExternal {
			out.External = true
		}
	}
	vgs := slices.Clone(in.VolumeGroups)
	slices.SortFunc(vgs, func(a, b lvmv1.LVMVolumeGroup) int { return strings.Compare(a.Name, b.Name) })
	for _, vg := range vgs {
		if !MatchesNode(vg.Spec.NodeSelector, in.Node) {
			continue
		}
		out.VolumeGroups = append(out.VolumeGroups, v1VolumeGroup(&vg))
		out.DeviceClasses = append(out.DeviceClasses, v1DeviceClass(&vg))
	}
	attachPools(out)
	return out
}

func v1VolumeGroup(vg *lvmv1.LVMVolumeGroup) VolumeGroup {
	ds := vg.Spec.DeviceSelector
	d := VolumeGroup{
		Name: vg.Name, Source: SourceLVMVolumeGroup, Object: vg.Name, Selector: selector.FromV1(ds),
		ForceWipe: ds != nil && ds.ForceWipeDevicesAndDestroyAllData != nil && *ds.ForceWipeDevicesAndDestroyAllData,
		Shared:    vg.Spec.DeviceAccessPolicy.Normalized() == lvmv1.DeviceAccessPolicyShared,
		Deleting:  vg.DeletionTimestamp != nil,
	}
	switch {
	case d.Selector.HasPaths():
		d.DiscoveryPolicy = lvmv1.DeviceDiscoveryPolicyPreconfigured
	case vg.Spec.DeviceDiscoveryPolicy != nil && *vg.Spec.DeviceDiscoveryPolicy == lvmv1.DeviceDiscoveryPolicyStatic:
		d.DiscoveryPolicy, d.StaticDiscovery = lvmv1.DeviceDiscoveryPolicyRuntimeStatic, true
	default:
		d.DiscoveryPolicy = lvmv1.DeviceDiscoveryPolicyRuntimeDynamic
	}
	if vg.Spec.RAIDConfig != nil {
		// RAID needs every device from the start: LVMS never adds devices to a RAID volume group later.
		d.StaticDiscovery = true
	}
	return d
}

func v1DeviceClass(vg *lvmv1.LVMVolumeGroup) DeviceClass {
	c := DeviceClass{Name: vg.Name, VolumeGroup: vg.Name, Source: SourceLVMVolumeGroup, Default: vg.Spec.Default,
		FSType: string(vg.Spec.FilesystemType), Needs: []string{"linear", "striped"}}
	switch {
	case vg.Spec.ThinPoolConfig != nil:
		cfg := vg.Spec.ThinPoolConfig
		tp := ThinPool{Name: cfg.Name, SizePercent: cfg.SizePercent, OverprovisionRatio: float64(cfg.OverprovisionRatio),
			DataUsageThreshold: cfg.DataUsageThreshold, MetadataUsageThreshold: cfg.MetadataUsageThreshold}
		if cfg.ChunkSizeCalculationPolicy != lvmv1.ChunkSizeCalculationPolicyHost {
			tp.ChunkSize = DefaultV1ChunkSize
			if cfg.ChunkSize != nil {
				tp.ChunkSize = uint64(cfg.ChunkSize.Value())
			}
		}
		if cfg.MetadataSizeCalculationPolicy == lvmv1.MetadataSizePolicyStatic {
			tp.MetadataSize = DefaultV1MetadataSize
			if cfg.MetadataSize != nil {
				tp.MetadataSize = uint64(cfg.MetadataSize.Value())
			}
		}
		tp = withPoolDefaults(tp)
		c.Thin = &tp
		c.Needs = []string{"thin-pool", "thin"}
	case vg.Spec.RAIDConfig != nil:
		c.LVCreateOptions = RAIDOptions(vg.Spec.RAIDConfig)
		c.Needs = []string{"raid"}
		zero := uint64(0)
		c.SpareGB = &zero
	default:
		zero := uint64(0)
		c.SpareGB = &zero
	}
	return c
}

// RAIDOptions are the lvcreate options of a v1 RAID device class.
func RAIDOptions(r *lvmv1.RAIDConfig) []string {
	opts := []string{"--type=" + string(r.Type)}
	if r.Type == "raid1" || r.Type == "raid10" {
		mirrors := 1
		if r.Mirrors != nil {
			mirrors = *r.Mirrors
		}
		opts = append(opts, fmt.Sprintf("--mirrors=%d", mirrors))
	}
	if r.Stripes != nil {
		opts = append(opts, fmt.Sprintf("--stripes=%d", *r.Stripes))
	}
	if r.StripeSize != nil {
		opts = append(opts, fmt.Sprintf("--stripesize=%dk", r.StripeSize.Value()/1024))
	}
	return opts
}

// Merge combines the LVMNode's desired state with the v1 one. The LVMNode wins for a volume group or
// device class both name (a migration hands v1 volume groups to v2 under the same names); the v1 ones it
// does not name are kept. External configuration comes from v1.
func Merge(v2, v1 *Node) *Node {
	switch {
	case v2 == nil:
		return v1
	case v1 == nil:
		return v2
	}
	out := *v2
	out.VolumeGroups = slices.Clone(v2.VolumeGroups)
	out.DeviceClasses = slices.Clone(v2.DeviceClasses)
	out.External = v1.External
	for _, vg := range v1.VolumeGroups {
		if _, taken := v2.VolumeGroup(vg.Name); !taken {
			out.VolumeGroups = append(out.VolumeGroups, vg)
		}
	}
	for _, dc := range v1.DeviceClasses {
		if !slices.ContainsFunc(out.DeviceClasses, func(c DeviceClass) bool { return c.Name == dc.Name }) {
			out.DeviceClasses = append(out.DeviceClasses, dc)
		}
	}
	return &out
}
