package plan

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/operator/names"
)

// converted is one v1 device class in v2 terms.
type converted struct {
	index int
	vg    lvmv2.VolumeGroup
	dc    lvmv2.DeviceClass
	// selector is the class's node selector in canonical form (nil: every node); key identifies it.
	selector *corev1.NodeSelector
	key      string
}

// convert maps device class i. only is true when it is the LVMCluster's only device class (then it is the
// default, as the operator treats it).
func convert(i int, dc *lvmv1.DeviceClass, only bool, fs *findings) converted {
	at := classPath(i)
	shared := dc.DeviceAccessPolicy.Normalized() == lvmv1.DeviceAccessPolicyShared
	c := converted{index: i, selector: canonicalNodeSelector(dc.NodeSelector)}
	c.key = selectorKey(c.selector)

	c.vg = lvmv2.VolumeGroup{Name: dc.Name, DeviceSelector: deviceSelector(dc.DeviceSelector)}
	if shared {
		c.vg.AccessPolicy = lvmv2.AccessPolicyShared
	}
	className := names.DefaultClassPrefix + "-" + dc.Name
	c.dc = lvmv2.DeviceClass{
		Name: dc.Name, VolumeGroup: dc.Name, Strategy: lvmv2.StrategyThick, Default: dc.Default || only,
		StorageClass: &lvmv2.StorageClassTemplate{NamingPolicy: lvmv2.NamingExplicit, Name: className},
	}
	if !shared {
		c.dc.FilesystemType = lvmv2.FilesystemType(dc.FilesystemType)
		if c.dc.FilesystemType == "" {
			c.dc.FilesystemType = lvmv2.FilesystemType(lvmv1.FilesystemXFS)
		}
	}
	if dc.ThinPoolConfig != nil {
		c.dc.Strategy = lvmv2.StrategyThin
		c.dc.Thin = thinConfig(dc.ThinPoolConfig)
		c.dc.SnapshotClass = &lvmv2.SnapshotClassTemplate{NamingPolicy: lvmv2.NamingExplicit, Name: className}
	}
	if o := dc.StorageClassOptions; o != nil {
		c.dc.StorageClass.ReclaimPolicy = o.ReclaimPolicy
		c.dc.StorageClass.VolumeBindingMode = o.VolumeBindingMode
		c.dc.StorageClass.AdditionalParameters = maps.Clone(o.AdditionalParameters)
	}
	c.findings(at, dc, only, shared, fs)
	return c
}

// findings lists what device class dc loses or changes on the way to v2.
func (c converted) findings(at string, dc *lvmv1.DeviceClass, only, shared bool, fs *findings) {
	i, name := c.index, dc.Name
	if ds := dc.DeviceSelector; ds != nil {
		// Shared volume groups are set up outside the node agent's filter engine, which is where v1's
		// required paths are enforced; both APIs name the shared LUN the same way there.
		if len(ds.Paths) > 0 && !shared {
			fs.add(Lossy, CodePathsNotRequired, i, name, at+".deviceSelector.paths",
				"v1 requires every one of paths on each selected node: a missing one fails the node's volume group %s (or marks it Degraded once it exists). v2 has no required devices: the set selects the listed devices a node has and reports the others as not found, so a missing disk no longer fails the node. Volume group and volumes are unchanged.", name)
		}
		if len(ds.OptionalPaths) > 0 {
			fs.add(Lossy, CodeOptionalPathsNoMinimum, i, name, at+".deviceSelector.optionalPaths",
				"v1 refuses to create volume group %s on a node where none of optionalPaths exists. v2 has no minimum: it uses whichever listed devices a node has. Existing volume groups are unaffected; only a node with none of the devices is reported differently.", name)
		}
		if ds.ForceWipeDevicesAndDestroyAllData != nil && *ds.ForceWipeDevicesAndDestroyAllData {
			fs.add(Lossy, CodeForceWipeNotCarried, i, name, at+".deviceSelector.forceWipeDevicesAndDestroyAllData",
				"The devices were wiped once when v1 built volume group %s, and the record of that wipe lives on the v1 objects. The plan leaves forceWipeDevicesAndDestroyAllData off the v2 volume group so that nothing is wiped during or after the hand-over: a device you add to the list later is not wiped; wipe it by hand (wipefs -a) before adding it.", name)
		}
	}
	if hasNoPaths(dc.DeviceSelector) && dc.DeviceDiscoveryPolicy != nil && *dc.DeviceDiscoveryPolicy == lvmv1.DeviceDiscoveryPolicyStatic {
		fs.add(Lossy, CodeStaticDiscoveryNotSupported, i, name, at+".deviceDiscoveryPolicy",
			"With deviceDiscoveryPolicy Static, v1 keeps the devices volume group %s was created with. v2 has no static discovery: the volume group selects every available device (operator Any), so an empty disk attached to a node later is added to it. To keep the volume group as it is, list its devices in the v2 deviceSelector (path In) before applying.", name)
	}
	if dc.RAIDConfig != nil {
		fs.add(Lossy, CodeRAIDNotSupported, i, name, at+".raidConfig",
			"v2alpha1 has no RAID settings: new volumes of device class %s would be created as linear LVs without redundancy (existing RAID volumes keep their layout). Keep this LVMCluster until v2 supports RAID, or accept that new volumes are not mirrored.", name)
	}
	if o := dc.StorageClassOptions; o != nil && len(o.AdditionalLabels) > 0 {
		fs.add(Lossy, CodeStorageClassLabelsNotSupported, i, name, at+".storageClassOptions.additionalLabels",
			"v2alpha1 StorageClass templates have no labels: when the LVMNodeSet takes StorageClass %s-%s over, LVMS drops the labels it set for the LVMCluster (%s). Add them back by hand afterwards if something relies on them.",
			names.DefaultClassPrefix, name, strings.Join(slices.Sorted(maps.Keys(o.AdditionalLabels)), ", "))
	}
	if only && !dc.Default {
		fs.add(Note, CodeImplicitDefault, i, name, at+".default",
			"%s is the LVMCluster's only device class, which makes its StorageClass the default without default: true. v2 has no such rule, so the plan sets default: true.", name)
	}
	if selectsNoNode(dc.NodeSelector) {
		fs.add(Note, CodeSelectsNoNode, i, name, at+".nodeSelector",
			"The node selector of %s has no term with a requirement, so it selects no node, in v1 as in v2: the LVMNodeSet will manage no node either. Fix the selector in the plan if that is not what you want.", name)
	}
	if shared {
		fs.add(Note, CodeSharedVolumeGroup, i, name, at+".deviceAccessPolicy",
			"Volume group %s is shared: one volume group on a LUN every selected node sees, locked with lvmlockd and sanlock. Nodes are handed over one at a time, so for a while the LVMCluster serves it on some nodes and the LVMNodeSet on others; change nothing on the volume group until every node of the set is handed over.", name)
	}
}

func hasNoPaths(ds *lvmv1.DeviceSelector) bool {
	return ds == nil || (len(ds.Paths) == 0 && len(ds.OptionalPaths) == 0)
}

// deviceSelector maps v1 paths and optionalPaths to path In terms (at most 32 values each, the v2 limit;
// terms are ORed, so splitting changes nothing). No paths means every available device: operator Any.
func deviceSelector(ds *lvmv1.DeviceSelector) lvmv2.DeviceSelector {
	if hasNoPaths(ds) {
		return lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{
			MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpAny}},
		}}}
	}
	var values []string
	for _, p := range slices.Concat(ds.Paths, ds.OptionalPaths) {
		values = append(values, string(p))
	}
	var out lvmv2.DeviceSelector
	for chunk := range slices.Chunk(values, maxValuesPerExpr) {
		out.DeviceSelectorTerms = append(out.DeviceSelectorTerms, lvmv2.DeviceSelectorTerm{
			MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: slices.Clone(chunk)}},
		})
	}
	return out
}

// thinConfig carries a v1 thin pool over with the values the node agent used for it (nodeagent/desired):
// v1's defaults are written out, so the pool is configured exactly as before whatever v2 defaults to.
func thinConfig(t *lvmv1.ThinPoolConfig) *lvmv2.ThinConfig {
	out := &lvmv2.ThinConfig{
		PoolName:            t.Name,
		SizePercent:         int32(t.SizePercent),
		OverprovisionRatio:  int32(t.OverprovisionRatio),
		AutoextendThreshold: desired.DefaultAutoextendThreshold,
		AutoextendPercent:   desired.DefaultAutoextendPercent,
		// v2 defaults these as v1 does; set ones carry over.
		DataUsageThreshold:     int32(t.DataUsageThreshold),
		MetadataUsageThreshold: int32(t.MetadataUsageThreshold),
	}
	if out.SizePercent == 0 {
		out.SizePercent = desired.DefaultSizePercent
	}
	if t.ChunkSizeCalculationPolicy != lvmv1.ChunkSizeCalculationPolicyHost {
		out.ChunkSize = resource.NewQuantity(desired.DefaultV1ChunkSize, resource.BinarySI)
		if t.ChunkSize != nil {
			q := t.ChunkSize.DeepCopy()
			out.ChunkSize = &q
		}
	}
	if t.MetadataSizeCalculationPolicy == lvmv1.MetadataSizePolicyStatic {
		out.MetadataSize = resource.NewQuantity(desired.DefaultV1MetadataSize, resource.BinarySI)
		if t.MetadataSize != nil {
			q := t.MetadataSize.DeepCopy()
			out.MetadataSize = &q
		}
	}
	return out
}
