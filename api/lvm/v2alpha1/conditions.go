package v2alpha1

// Condition types (KEP-1623) on LVMNode, LVMNodeSet and, for the node ones, on v1alpha1
// LVMVolumeGroupNodeStatus.
const (
	// ConditionVolumeGroupsHealthy: every desired volume group exists with its devices and thin pools.
	ConditionVolumeGroupsHealthy = "VolumeGroupsHealthy"
	// ConditionDeviceClassesHealthy: every device class can provision.
	ConditionDeviceClassesHealthy = "DeviceClassesHealthy"
	// ConditionStorageClassesHealthy: every StorageClass and VolumeSnapshotClass exists.
	ConditionStorageClassesHealthy = "StorageClassesHealthy"
	// ConditionLVMDConfigured: lvmd.yaml lists every device class (or, with external configuration, is valid).
	ConditionLVMDConfigured = "LVMDConfigured"
	// ConditionLVMNodesReady: every node of a set is Ready.
	ConditionLVMNodesReady = "LVMNodesReady"
	// ConditionProviderReady: the CSI driver side of a set is deployed.
	ConditionProviderReady = "ProviderReady"
	// ConditionNoConflicts: no other set or LVMCluster claims the same nodes, volume groups or devices.
	ConditionNoConflicts = "NoConflicts"
)

// Condition reasons of a node object that asks nothing of its node: True, and no statement about the node's
// health (a node managed through the other API may still ask for volume groups there).
const (
	ReasonNoVolumeGroups  = "NoVolumeGroups"
	ReasonNoDeviceClasses = "NoDeviceClasses"
)

// ReasonCode is the machine-readable reason a candidate device was excluded. It appears in
// status.volumeGroups[].devices.excluded[].reasonCodes (v2) and spec.nodeStatus[].excluded[].reasonCodes
// (v1), in the same order as the sentences in reasons. The node agent's filters produce them in the order
// listed here; the console explains each one.
type ReasonCode string

// Exclusion reason codes, in filter order.
const (
	ReasonNotFound               ReasonCode = "NotFound"               // a path the selector names does not exist on the node
	ReasonNotSelected            ReasonCode = "NotSelected"            // no selector term (or path) matches the device
	ReasonUnsupportedType        ReasonCode = "UnsupportedType"        // rom, or another type that cannot hold a PV
	ReasonReadOnly               ReasonCode = "ReadOnly"               // the kernel reports the device read-only
	ReasonSuspended              ReasonCode = "Suspended"              // a suspended device-mapper device
	ReasonTooSmall               ReasonCode = "TooSmall"               // smaller than the minimum PV size
	ReasonReservedPartition      ReasonCode = "ReservedPartition"      // a boot, BIOS, EFI or reserved partition
	ReasonHasChildren            ReasonCode = "HasChildren"            // has partitions or holders (dm, md) on top
	ReasonMounted                ReasonCode = "Mounted"                // mounted (or used as swap)
	ReasonForeignSignature       ReasonCode = "ForeignSignature"       // carries a filesystem or partition table signature
	ReasonOtherVolumeGroup       ReasonCode = "OtherVolumeGroup"       // a PV of a volume group LVMS does not own
	ReasonLogicalVolume          ReasonCode = "LogicalVolume"          // an LV, e.g. one of our own CSI volumes
	ReasonKubeletLoopDevice      ReasonCode = "KubeletLoopDevice"      // a loop device backing kubelet volumes
	ReasonMultipathComponent     ReasonCode = "MultipathComponent"     // a path of a multipath device: use the mpath device
	ReasonUsedByOtherVolumeGroup ReasonCode = "UsedByOtherVolumeGroup" // already in (or chosen for) another of our volume groups
	ReasonStaticDiscovery        ReasonCode = "StaticDiscovery"        // new device, but the volume group uses static discovery
	ReasonInUse                  ReasonCode = "InUse"                  // another program holds it open exclusively (a VM, a database on the raw disk, mkfs)
	ReasonPersistentVolume       ReasonCode = "PersistentVolume"       // a PersistentVolume uses it directly (local volume, VM disk)
)
