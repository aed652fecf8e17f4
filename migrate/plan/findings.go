package plan

import (
	"cmp"
	"fmt"
	"slices"
)

// Severity says whether a finding changes behaviour.
type Severity string

// Severities.
const (
	// Lossy: after migration LVMS behaves differently from what the LVMCluster asked for.
	Lossy Severity = "Lossy"
	// Note: the mapping is exact, but worth a sentence.
	Note Severity = "Note"
)

// Code names one kind of finding. Codes are stable: scripts and the console match on them.
type Code string

// Lossy codes.
const (
	// CodePathsNotRequired: v1 paths must all exist on a node; v2 uses the listed devices it finds.
	CodePathsNotRequired Code = "PathsNotRequired"
	// CodeOptionalPathsNoMinimum: v1 needs at least one of optionalPaths on a node; v2 needs none.
	CodeOptionalPathsNoMinimum Code = "OptionalPathsNoMinimum"
	// CodeForceWipeNotCarried: forceWipeDevicesAndDestroyAllData is left off the v2 volume group.
	CodeForceWipeNotCarried Code = "ForceWipeNotCarried"
	// CodeStaticDiscoveryNotSupported: deviceDiscoveryPolicy Static has no v2 equivalent.
	CodeStaticDiscoveryNotSupported Code = "StaticDiscoveryNotSupported"
	// CodeRAIDNotSupported: raidConfig has no v2 equivalent.
	CodeRAIDNotSupported Code = "RAIDNotSupported"
	// CodeStorageClassLabelsNotSupported: storageClassOptions.additionalLabels has no v2 equivalent.
	CodeStorageClassLabelsNotSupported Code = "StorageClassLabelsNotSupported"
	// CodeDefaultClassChanges: the cluster's default StorageClass now is another class of this LVMCluster.
	CodeDefaultClassChanges Code = "DefaultClassChanges"
	// CodeGeneratedClassDiffers: the operator would generate a different StorageClass or
	// VolumeSnapshotClass from the set than from the LVMCluster (a planner bug; reported, never hidden).
	CodeGeneratedClassDiffers Code = "GeneratedClassDiffers"
)

// Note codes.
const (
	// CodeImplicitDefault: the only device class of an LVMCluster is the default without saying so.
	CodeImplicitDefault Code = "ImplicitDefaultMadeExplicit"
	// CodeSelectsNoNode: a node selector whose terms are all empty selects no node, in v1 as in v2.
	CodeSelectsNoNode Code = "NodeSelectorSelectsNoNode"
	// CodeNodeSetSplit: more device classes share a node selector than one set holds volume groups.
	CodeNodeSetSplit Code = "NodeSetSplit"
	// CodeSharedVolumeGroup: a shared volume group is seen by every node of the set at once.
	CodeSharedVolumeGroup Code = "SharedVolumeGroup"
	// CodeStorageClassMissing and CodeSnapshotClassMissing: the class does not exist in the cluster yet.
	CodeStorageClassMissing  Code = "StorageClassMissing"
	CodeSnapshotClassMissing Code = "SnapshotClassMissing"
	// CodeClassTaken: a class of that name exists but was not generated for this LVMCluster.
	CodeClassTaken Code = "ClassTaken"
	// CodeDefaultHeldElsewhere: another StorageClass is the cluster's default.
	CodeDefaultHeldElsewhere Code = "DefaultHeldElsewhere"
)

// Finding is one mapping that is not exact, or an exact one worth explaining.
type Finding struct {
	Code     Code     `json:"code"`
	Severity Severity `json:"severity"`
	// Path is the v1 field the finding is about, for example spec.storage.deviceClasses[0].raidConfig.
	Path string `json:"path"`
	// DeviceClass names the device class concerned ("" for the whole LVMCluster).
	DeviceClass string `json:"deviceClass,omitempty"`
	// Message says what it means for the user and what to do.
	Message string `json:"message"`

	// order is the device class's index in the LVMCluster (-1: cluster-wide), for sorting.
	order int
}

// findings collects findings while a plan is built.
type findings []Finding

func (fs *findings) add(sev Severity, code Code, order int, dc, path, format string, args ...any) {
	*fs = append(*fs, Finding{Code: code, Severity: sev, Path: path, DeviceClass: dc, Message: fmt.Sprintf(format, args...), order: order})
}

// sorted returns the findings in LVMCluster order (cluster-wide first), then by path and code.
func (fs findings) sorted() []Finding {
	out := slices.Clone([]Finding(fs))
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Code, b.Code),
			cmp.Compare(a.Message, b.Message))
	})
	return out
}

// classPath is the field path of device class i.
func classPath(i int) string { return fmt.Sprintf("spec.storage.deviceClasses[%d]", i) }
