package v2alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Device is a device that is part of a volume group.
type Device struct {
	// KName is the kernel device path (/dev/sdb).
	KName string `json:"kname"`
	// Path is the path the selector matched, when it differs from kname (for example a /dev/disk/by-id link).
	// +optional
	Path string `json:"path,omitempty"`
	// Size of the device.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// SelectorTerm is the 1-based device selector term that selected the device.
	// +optional
	SelectorTerm int32 `json:"selectorTerm,omitempty"`
	// Links are the device's stable names: its /dev/disk/by-id (WWN, serial) and /dev/disk/by-path links,
	// sorted, so a selector that names a disk by one of them finds its device in the status.
	// +optional
	Links []string `json:"links,omitempty"`
	// Wiped is when LVMS wiped the device by request (forceWipeDevicesAndDestroyAllData).
	// +optional
	Wiped *metav1.Time `json:"wiped,omitempty"`
}

// ExcludedDevice is a candidate device that is not used, with why.
type ExcludedDevice struct {
	// KName is the kernel device path, or the selector's path when the device was not found.
	KName string `json:"kname"`
	// Path is the selector's path that named the device, when it differs from kname.
	// +optional
	Path string `json:"path,omitempty"`
	// Links are the device's stable names (as for included devices).
	// +optional
	Links []string `json:"links,omitempty"`
	// Size of the device, when it is on the node: which disk it is, at a glance.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// Reasons as sentences, as the seed shows them.
	Reasons []string `json:"reasons"`
	// ReasonCodes are the machine-readable codes of the reasons, in the same order (for example NotSelected,
	// ReadOnly, Mounted, ForeignSignature, NotFound).
	// +optional
	ReasonCodes []string `json:"reasonCodes,omitempty"`
}

// Devices are a volume group's devices, used and not.
type Devices struct {
	// Included devices are physical volumes of the volume group (or about to be).
	// +optional
	Included []Device `json:"included,omitempty"`
	// Excluded devices were candidates but are not used, each with reasons.
	// +optional
	Excluded []ExcludedDevice `json:"excluded,omitempty"`
}

// LogicalVolumeStatus is an LV the agent manages itself (a thin pool), with usage.
type LogicalVolumeStatus struct {
	// Name of the LV.
	Name string `json:"name"`
	// Size of the LV.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// DataPercent used (thin pools).
	// +optional
	DataPercent string `json:"dataPercent,omitempty"`
	// MetadataPercent used (thin pools).
	// +optional
	MetadataPercent string `json:"metadataPercent,omitempty"`
	// DataUsageThreshold and MetadataUsageThreshold (thin pools) are the device class's thresholds in
	// percent: at them no new volume is placed on the pool.
	// +optional
	DataUsageThreshold int32 `json:"dataUsageThreshold,omitempty"`
	// +optional
	MetadataUsageThreshold int32 `json:"metadataUsageThreshold,omitempty"`
	// Attributes as lvs lv_attr shows them (twi-a-tz--).
	// +optional
	Attributes string `json:"attributes,omitempty"`
}

// VolumeGroupStatus is one volume group on the node.
type VolumeGroupStatus struct {
	// Name of the volume group.
	Name string `json:"name"`
	// State: Healthy, Progressing, Degraded, Failed or Missing.
	State State `json:"state"`
	// Message explains a state other than Healthy.
	// +optional
	Message string `json:"message,omitempty"`
	// Size of the volume group.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// Free space of the volume group.
	// +optional
	Free *resource.Quantity `json:"free,omitempty"`
	// Devices included and excluded.
	// +optional
	Devices Devices `json:"devices,omitempty"`
	// Volumes the agent manages in the VG (thin pools), with usage.
	// +optional
	Volumes []LogicalVolumeStatus `json:"volumes,omitempty"`
	// Lockspace of a Shared volume group on this node: Joined, or NotJoined (the message says why).
	// +optional
	// +kubebuilder:validation:Enum=Joined;NotJoined
	Lockspace LockspaceState `json:"lockspace,omitempty"`
	// InitializedBy is the node that created a Shared volume group (vgcreate --shared).
	// +optional
	InitializedBy string `json:"initializedBy,omitempty"`
	// ActiveVolumes are the volumes of a Shared volume group active on this node (staged by the shared CSI
	// driver), with their lock: lvs on one node cannot see another's, so this is where an admin and the
	// operator (before it removes or grows a volume) see where each volume is in use.
	// +optional
	// +listType=map
	// +listMapKey=name
	ActiveVolumes []SharedActiveVolume `json:"activeVolumes,omitempty"`
}

// SharedActiveVolume is a volume of a Shared volume group active on a node.
type SharedActiveVolume struct {
	// Name of the LV (the volume ID).
	Name string `json:"name"`
	// Mode is Exclusive (ReadWriteOnce, lvchange -aey) or Shared (ReadWriteMany block, lvchange -asy).
	// +kubebuilder:validation:Enum=Exclusive;Shared
	Mode SharedActivationMode `json:"mode"`
}

// SharedActivationMode is how a node holds a shared volume's lock.
type SharedActivationMode string

// Activation modes.
const (
	ActivationExclusive SharedActivationMode = "Exclusive"
	ActivationShared    SharedActivationMode = "Shared"
)

// LockspaceState is whether a node is in a Shared volume group's sanlock lockspace.
type LockspaceState string

// Lockspace states.
const (
	LockspaceJoined    LockspaceState = "Joined"
	LockspaceNotJoined LockspaceState = "NotJoined"
)

// SharedLockingStatus is the node's lock managers for Shared volume groups.
type SharedLockingStatus struct {
	// Mode: Host (the host runs sanlock and lvmlockd), Agent (the node agent runs them) or NotRunning.
	// +kubebuilder:validation:Enum=Host;Agent;NotRunning
	Mode string `json:"mode"`
	// HostID is the node's sanlock host ID (1..2000), claimed through the Lease lvms-host-id-<N>.
	// +optional
	HostID int32 `json:"hostID,omitempty"`
	// Watchdog tells whether sanlock uses a watchdog; without one there is no fencing.
	Watchdog bool `json:"watchdog"`
	// Fencing says in one sentence whether a node that loses its leases is reset.
	// +optional
	Fencing string `json:"fencing,omitempty"`
	// Message says why a lock manager is not running, when one is not.
	// +optional
	Message string `json:"message,omitempty"`
}

// ClassStatus is the state of a generated StorageClass or VolumeSnapshotClass.
type ClassStatus struct {
	// Name of the class.
	Name string `json:"name"`
	// State: Exists or Missing.
	State State `json:"state"`
}

// DeviceClassStatus is one device class on the node.
type DeviceClassStatus struct {
	// Name of the device class.
	Name string `json:"name"`
	// VolumeGroup it allocates from.
	VolumeGroup string `json:"volumeGroup"`
	// State: Healthy, Progressing, Degraded or Failed.
	State State `json:"state"`
	// Message explains a state other than Healthy.
	// +optional
	Message string `json:"message,omitempty"`
	// StorageClass generated for it.
	// +optional
	StorageClass *ClassStatus `json:"storageClass,omitempty"`
	// SnapshotClass generated for it.
	// +optional
	SnapshotClass *ClassStatus `json:"snapshotClass,omitempty"`
}

// LVMNodeStatus is what the node agent found on the node.
type LVMNodeStatus struct {
	// State: Ready, Progressing, Degraded, Failed or Unknown.
	// +optional
	State State `json:"state,omitempty"`
	// Message explains a state other than Ready in one sentence.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the spec generation the agent acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// VolumeGroups, in spec order.
	// +optional
	VolumeGroups []VolumeGroupStatus `json:"volumeGroups,omitempty"`
	// DeviceClasses, in spec order.
	// +optional
	DeviceClasses []DeviceClassStatus `json:"deviceClasses,omitempty"`
	// SharedLocking is the node's lock managers, once a Shared volume group needs them.
	// +optional
	SharedLocking *SharedLockingStatus `json:"sharedLocking,omitempty"`
	// Conditions: VolumeGroupsHealthy, DeviceClassesHealthy, StorageClassesHealthy, LVMDConfigured.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=lvmn
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LVMNode is one node's storage: its spec comes from the owning LVMNodeSet's template, its status from the
// node agent. Its name is the node's name.
type LVMNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LVMNodeSpec   `json:"spec,omitempty"`
	Status LVMNodeStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// LVMNodeList is a list of LVMNode.
type LVMNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LVMNode `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LVMNode{}, &LVMNodeList{})
}
