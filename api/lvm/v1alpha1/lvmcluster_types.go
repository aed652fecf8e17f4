package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigurationPolicy says who owns the node's device-class configuration.
// +kubebuilder:validation:Enum=ExternalConfiguration
type ConfigurationPolicy string

const (
	// ConfigurationPolicyExternal means the device classes come from a host lvmd.yaml (TopoLVM format) that
	// something else writes, as MicroShift does (seed 002). LVMS deploys the node agent and the CSI driver but
	// creates no volume groups. Leaving configurationPolicy empty means LVMS manages the device classes.
	ConfigurationPolicyExternal ConfigurationPolicy = "ExternalConfiguration"
)

// DeviceAccessPolicy says whether the volume group of a device class lives on node-local disks or on a LUN
// shared by every selected node (seed 001).
// +kubebuilder:validation:Enum=shared;nodeLocal;local
type DeviceAccessPolicy string

const (
	// DeviceAccessPolicyShared builds the volume group with lvmlockd/sanlock on a LUN every node sees and
	// serves its volumes through the shared driver (raw block volumes, no thin pool).
	DeviceAccessPolicyShared DeviceAccessPolicy = "shared"
	// DeviceAccessPolicyNodeLocal is the default: one volume group per node on that node's disks.
	DeviceAccessPolicyNodeLocal DeviceAccessPolicy = "nodeLocal"
	// DeviceAccessPolicyLocal is the spelling seed 001 also uses; it is accepted and means nodeLocal.
	DeviceAccessPolicyLocal DeviceAccessPolicy = "local"
)

// Normalized returns the canonical spelling: "local" and "" become "nodeLocal".
func (p DeviceAccessPolicy) Normalized() DeviceAccessPolicy {
	if p == DeviceAccessPolicyShared {
		return p
	}
	return DeviceAccessPolicyNodeLocal
}

// LVMClusterSpec defines the desired state of LVMCluster.
//
// Without configurationPolicy at least one device class is required; with ExternalConfiguration none may be
// given, because the host lvmd.yaml declares them.
// +kubebuilder:validation:XValidation:rule="has(self.configurationPolicy) || (has(self.storage) && has(self.storage.deviceClasses) && size(self.storage.deviceClasses) > 0)",message="spec.storage.deviceClasses needs at least one device class; to use a host lvmd.yaml instead (MicroShift), set spec.configurationPolicy: ExternalConfiguration"
// +kubebuilder:validation:XValidation:rule="!has(self.configurationPolicy) || !has(self.storage) || !has(self.storage.deviceClasses) || size(self.storage.deviceClasses) == 0",message="spec.storage.deviceClasses must be empty when configurationPolicy is ExternalConfiguration: the host lvmd.yaml declares the device classes; remove the device classes or remove configurationPolicy"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.configurationPolicy) == has(self.configurationPolicy)",message="spec.configurationPolicy is immutable: switching between LVMS-managed and host lvmd.yaml configuration would orphan or take over volume groups; create a new LVMCluster instead"
type LVMClusterSpec struct {
	// Tolerations are applied to the node agent and used to decide which nodes are eligible.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Storage describes the device classes LVMS manages.
	// +optional
	Storage Storage `json:"storage,omitempty"`

	// ConfigurationPolicy ExternalConfiguration makes the node agent read a host lvmd.yaml instead of
	// managing volume groups (MicroShift). Empty means LVMS manages the device classes given here.
	// +optional
	ConfigurationPolicy ConfigurationPolicy `json:"configurationPolicy,omitempty"`
}

// Storage holds the device classes of an LVMCluster.
// +kubebuilder:validation:XValidation:rule="!has(self.deviceClasses) || self.deviceClasses.filter(d, has(d.default) && d.default).size() <= 1",message="at most one device class may set default: true; unset default on all but one device class"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceClasses) || self.deviceClasses.all(a, !has(a.deviceSelector) || !has(a.deviceSelector.paths) || self.deviceClasses.all(b, a.name == b.name || !has(b.deviceSelector) || !has(b.deviceSelector.paths) || !a.deviceSelector.paths.exists(p, p in b.deviceSelector.paths)))",message="a device path may belong to only one device class: remove the path from all but one device class"
type Storage struct {
	// DeviceClasses assign devices to volume groups; each device class becomes a volume group of the same
	// name on every selected node, and a StorageClass lvms-<name>.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	DeviceClasses []DeviceClass `json:"deviceClasses,omitempty"`
}

// IsDefault reports whether dc, one of s's device classes, is the default: it says so, or it is the only
// one (LVMS makes a lone device class the default). The StorageClass, the LVMVolumeGroup and every view
// of the class go by this.
func (s Storage) IsDefault(dc DeviceClass) bool { return dc.Default || len(s.DeviceClasses) == 1 }

// DeviceFilesystemType is the filesystem created on volumes of a device class.
// +kubebuilder:validation:Enum=xfs;ext4
type DeviceFilesystemType string

const (
	// FilesystemXFS is the default filesystem of node-local device classes.
	FilesystemXFS DeviceFilesystemType = "xfs"
	// FilesystemExt4 selects ext4.
	FilesystemExt4 DeviceFilesystemType = "ext4"
)

// DeviceDiscoveryPolicy says whether devices found after the volume group was created are added to it.
// +kubebuilder:validation:Enum=Static;Dynamic
type DeviceDiscoveryPolicy string

const (
	// DeviceDiscoveryPolicyStatic uses the devices found when the volume group was created.
	DeviceDiscoveryPolicyStatic DeviceDiscoveryPolicy = "Static"
	// DeviceDiscoveryPolicyDynamic keeps adding new matching devices.
	DeviceDiscoveryPolicyDynamic DeviceDiscoveryPolicy = "Dynamic"
)

// DeviceClass is one volume group (named after the class) and its StorageClass.
//
// Data-bearing settings are immutable (CEL transition rules): the thin pool, RAID layout, access policy,
// filesystem type, node selector and wipe flag. Devices may be added to or removed from paths day-2.
// +kubebuilder:validation:XValidation:rule="!has(self.thinPoolConfig) || !has(self.raidConfig)",message="thinPoolConfig and raidConfig are mutually exclusive: a device class is either thin-provisioned or RAID; remove one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceAccessPolicy) || self.deviceAccessPolicy != 'shared' || !has(self.thinPoolConfig)",message="thinPoolConfig is not supported on a shared device class: shared volume groups serve linear block volumes; remove thinPoolConfig or set deviceAccessPolicy: nodeLocal"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceAccessPolicy) || self.deviceAccessPolicy != 'shared' || !has(self.fstype)",message="fstype must be empty on a shared device class: shared volumes are raw block devices; remove fstype"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceAccessPolicy) || self.deviceAccessPolicy != 'shared' || !has(self.raidConfig)",message="raidConfig is not supported on a shared device class; remove raidConfig"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceAccessPolicy) || self.deviceAccessPolicy != 'shared' || (has(self.deviceSelector) && has(self.deviceSelector.paths) && size(self.deviceSelector.paths) > 0 && !has(self.deviceSelector.optionalPaths))",message="a shared device class needs deviceSelector.paths naming the shared LUN (the same path must resolve on every node, for example /dev/disk/by-id/wwn-...) and no optionalPaths"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceAccessPolicy) || self.deviceAccessPolicy != 'shared' || !has(self.deviceSelector) || !has(self.deviceSelector.forceWipeDevicesAndDestroyAllData) || !self.deviceSelector.forceWipeDevicesAndDestroyAllData",message="forceWipeDevicesAndDestroyAllData is not allowed on a shared device class: every node would wipe the same LUN; wipe it once by hand from one node"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.thinPoolConfig) == has(self.thinPoolConfig)",message="thinPoolConfig cannot be added to or removed from an existing device class: that would destroy its volumes; create a new device class instead"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.raidConfig) == has(self.raidConfig)",message="raidConfig cannot be added to or removed from an existing device class; create a new device class instead"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.deviceAccessPolicy) && oldSelf.deviceAccessPolicy == 'shared') == (has(self.deviceAccessPolicy) && self.deviceAccessPolicy == 'shared')",message="deviceAccessPolicy is immutable (local and nodeLocal are the same): changing it would rebuild the volume group; create a new device class instead"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.fstype) ? oldSelf.fstype : 'xfs') == (has(self.fstype) ? self.fstype : 'xfs')",message="fstype is immutable: existing volumes keep their filesystem; create a new device class for another filesystem"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.nodeSelector) == has(self.nodeSelector) && (!has(self.nodeSelector) || oldSelf.nodeSelector == self.nodeSelector)",message="nodeSelector is immutable: nodes that leave it would keep volume groups nobody manages; create a new device class instead"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.deviceSelector) && has(oldSelf.deviceSelector.forceWipeDevicesAndDestroyAllData) && oldSelf.deviceSelector.forceWipeDevicesAndDestroyAllData) == (has(self.deviceSelector) && has(self.deviceSelector.forceWipeDevicesAndDestroyAllData) && self.deviceSelector.forceWipeDevicesAndDestroyAllData)",message="forceWipeDevicesAndDestroyAllData is immutable after creation"
// +kubebuilder:validation:XValidation:rule="has(oldSelf.deviceSelector) || !has(self.deviceSelector)",message="a deviceSelector cannot be added to a device class created without one: it already uses every available device; create a new device class instead"
type DeviceClass struct {
	// Name of the device class, its volume group and (prefixed with lvms-) its StorageClass.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=245
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="name must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`

	// DeviceSelector chooses the devices of the volume group. Without it every available device is used.
	// +optional
	DeviceSelector *DeviceSelector `json:"deviceSelector,omitempty"`

	// NodeSelector chooses the nodes. Without it, all nodes whose taints are tolerated.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`

	// ThinPoolConfig makes the class thin-provisioned; without it volumes are thick (linear) LVs.
	// +optional
	ThinPoolConfig *ThinPoolConfig `json:"thinPoolConfig,omitempty"`

	// RAIDConfig makes volumes LVM RAID LVs.
	// +optional
	RAIDConfig *RAIDConfig `json:"raidConfig,omitempty"`

	// Default marks the StorageClass of this device class as the cluster default.
	// +optional
	Default bool `json:"default,omitempty"`

	// FilesystemType of volumes; empty means xfs. Must be empty for shared device classes.
	// +optional
	FilesystemType DeviceFilesystemType `json:"fstype,omitempty"`

	// DeviceDiscoveryPolicy: Static uses the devices present when the volume group was created; Dynamic keeps
	// adding new matching devices. Empty on an upgraded object means Dynamic, as LVMS treats it.
	// +optional
	DeviceDiscoveryPolicy *DeviceDiscoveryPolicy `json:"deviceDiscoveryPolicy,omitempty"`

	// StorageClassOptions tune the generated StorageClass.
	// +optional
	StorageClassOptions *StorageClassOptions `json:"storageClassOptions,omitempty"`

	// DeviceAccessPolicy: nodeLocal (default; "local" is accepted and means the same) or shared (a volume
	// group on a LUN every selected node sees, locked with lvmlockd and sanlock).
	// +optional
	DeviceAccessPolicy DeviceAccessPolicy `json:"deviceAccessPolicy,omitempty"`
}

// DevicePath is an absolute device path under /dev, preferably a stable /dev/disk/by-id/ link.
// +kubebuilder:validation:MaxLength=255
// +kubebuilder:validation:XValidation:rule="self.startsWith('/dev/') && !self.contains('/../') && !self.endsWith('/..')",message="device paths must be absolute paths under /dev/ without '..' (for example /dev/disk/by-id/wwn-0x5000c500a0b1c2d3)"
type DevicePath string

// DeviceSelector lists the devices of a device class.
// +kubebuilder:validation:XValidation:rule="(has(self.paths) && size(self.paths) > 0) || (has(self.optionalPaths) && size(self.optionalPaths) > 0)",message="a deviceSelector needs paths or optionalPaths; remove the deviceSelector to use every available device"
// +kubebuilder:validation:XValidation:rule="!has(self.paths) || !has(self.optionalPaths) || !self.paths.exists(p, p in self.optionalPaths)",message="a device path may not be listed in both paths and optionalPaths"
type DeviceSelector struct {
	// Paths must all resolve on every selected node; a missing one is reported by name and fails the node.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Paths []DevicePath `json:"paths,omitempty"`

	// OptionalPaths: at least one of them must resolve on every selected node; those found are used.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	OptionalPaths []DevicePath `json:"optionalPaths,omitempty"`

	// ForceWipeDevicesAndDestroyAllData wipes every signature from the selected paths once, before use.
	// The wipe is recorded and never repeated; a mounted device or one holding our volume group is never
	// wiped. All data on those devices is lost.
	// +optional
	ForceWipeDevicesAndDestroyAllData *bool `json:"forceWipeDevicesAndDestroyAllData,omitempty"`
}

// ChunkSizeCalculationPolicy says how the thin pool chunk size is chosen.
// +kubebuilder:validation:Enum=Host;Static
type ChunkSizeCalculationPolicy string

// Chunk size policies.
const (
	ChunkSizeCalculationPolicyHost   ChunkSizeCalculationPolicy = "Host"
	ChunkSizeCalculationPolicyStatic ChunkSizeCalculationPolicy = "Static"
)

// MetadataSizeCalculationPolicy says how the thin pool metadata size is chosen.
// +kubebuilder:validation:Enum=Host;Static
type MetadataSizeCalculationPolicy string

// Metadata size policies.
const (
	MetadataSizePolicyHost   MetadataSizeCalculationPolicy = "Host"
	MetadataSizePolicyStatic MetadataSizeCalculationPolicy = "Static"
)

// ThinPoolConfig describes the thin pool of a device class.
// +kubebuilder:validation:XValidation:rule="!has(self.chunkSize) || (has(self.chunkSizeCalculationPolicy) && self.chunkSizeCalculationPolicy == 'Static')",message="chunkSize can only be set with chunkSizeCalculationPolicy: Static"
// +kubebuilder:validation:XValidation:rule="!has(self.metadataSize) || (has(self.metadataSizeCalculationPolicy) && self.metadataSizeCalculationPolicy == 'Static')",message="metadataSize can only be set with metadataSizeCalculationPolicy: Static"
//
// Quantity ranges are one CEL rule per bound because each quantity() parse of an unbounded string uses most
// of a rule's cost budget. That metadataSize only grows is enforced by the node agent (lvm2 cannot shrink
// pool metadata); it reports a smaller request instead of acting on it.
// +kubebuilder:validation:XValidation:rule="!has(self.chunkSize) || quantity(self.chunkSize).compareTo(quantity('64Ki')) >= 0",message="chunkSize must be between 64Ki and 1Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.chunkSize) || quantity(self.chunkSize).compareTo(quantity('1Gi')) <= 0",message="chunkSize must be between 64Ki and 1Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.metadataSize) || quantity(self.metadataSize).compareTo(quantity('2Mi')) >= 0",message="metadataSize must be between 2Mi and 16Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.metadataSize) || quantity(self.metadataSize).compareTo(quantity('16Gi')) <= 0",message="metadataSize must be between 2Mi and 16Gi"
type ThinPoolConfig struct {
	// Name of the thin pool LV.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9+_.][a-zA-Z0-9+_.-]*$')",message="thin pool name may contain letters, digits and + _ . - and must not start with '-'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="thinPoolConfig.name is immutable: renaming would orphan the pool and its volumes"
	Name string `json:"name"`

	// SizePercent of the volume group's space given to the pool (10-100, default 90). Above 90 leaves too
	// little room to grow pool metadata later.
	// +kubebuilder:default=90
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="thinPoolConfig.sizePercent is immutable"
	// +optional
	SizePercent int `json:"sizePercent,omitempty"`

	// OverprovisionRatio is how many times the pool size may be promised to volumes (1-100; 1 disables
	// over-provisioning). It may change day-2.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	OverprovisionRatio int `json:"overprovisionRatio"`

	// ChunkSizeCalculationPolicy: Static (default) uses chunkSize (default 128Ki), Host lets lvm2 choose.
	// +kubebuilder:default=Static
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="chunkSizeCalculationPolicy is immutable"
	// +optional
	ChunkSizeCalculationPolicy ChunkSizeCalculationPolicy `json:"chunkSizeCalculationPolicy,omitempty"`

	// ChunkSize of the pool when the policy is Static (64Ki-1Gi, default 128Ki).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="chunkSize is immutable"
	// +optional
	ChunkSize *resource.Quantity `json:"chunkSize,omitempty"`

	// MetadataSizeCalculationPolicy: Host (default) lets lvm2 size metadata, Static uses metadataSize.
	// +kubebuilder:default=Host
	// +optional
	MetadataSizeCalculationPolicy MetadataSizeCalculationPolicy `json:"metadataSizeCalculationPolicy,omitempty"`

	// MetadataSize of the pool when the policy is Static (2Mi-16Gi, default 1Gi); it may only grow.
	// +optional
	MetadataSize *resource.Quantity `json:"metadataSize,omitempty"`

	// DataUsageThreshold: once the pool's real data use reaches this percent (1-100, default 90), no new
	// volume, snapshot or growth is placed on it (existing volumes keep working), and the class's capacity
	// is at most what is left below it. A Warning event comes 10 points before. It may change day-2.
	// +kubebuilder:default=90
	// +kubebuilder:validation:XValidation:rule="self > 0 && self <= 100",message="thinPoolConfig.dataUsageThreshold is a percentage: set it above 0 and at most 100 (default 90)"
	// +optional
	DataUsageThreshold int `json:"dataUsageThreshold,omitempty"`

	// MetadataUsageThreshold: the same for the pool's metadata (1-100, default 75). A pool whose metadata
	// fills turns read-only, so it stops earlier than data.
	// +kubebuilder:default=75
	// +kubebuilder:validation:XValidation:rule="self > 0 && self <= 100",message="thinPoolConfig.metadataUsageThreshold is a percentage: set it above 0 and at most 100 (default 75)"
	// +optional
	MetadataUsageThreshold int `json:"metadataUsageThreshold,omitempty"`
}

// RAIDType is an LVM RAID level.
// +kubebuilder:validation:Enum=raid1;raid4;raid5;raid6;raid10
type RAIDType string

// RAIDConfig makes the volumes of a device class LVM RAID LVs.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="raidConfig is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.mirrors) || self.type == 'raid1' || self.type == 'raid10'",message="mirrors is only valid for raid1 and raid10"
// +kubebuilder:validation:XValidation:rule="!has(self.stripes) || self.type != 'raid1'",message="stripes is not valid for raid1"
type RAIDConfig struct {
	// Type is the RAID level.
	Type RAIDType `json:"type"`
	// Mirrors for raid1/raid10 (default 1).
	// +kubebuilder:validation:Minimum=1
	// +optional
	Mirrors *int `json:"mirrors,omitempty"`
	// Stripes for raid4/5/6/10.
	// +kubebuilder:validation:Minimum=2
	// +optional
	Stripes *int `json:"stripes,omitempty"`
	// StripeSize for raid4/5/6/10 (a power of two; lvm2 defaults to 64Ki).
	// +optional
	StripeSize *resource.Quantity `json:"stripeSize,omitempty"`
}

// StorageClassOptions tune the StorageClass of a device class.
type StorageClassOptions struct {
	// ReclaimPolicy of the StorageClass (default Delete).
	// +kubebuilder:validation:Enum=Delete;Retain
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="reclaimPolicy is immutable once set"
	// +optional
	ReclaimPolicy *corev1.PersistentVolumeReclaimPolicy `json:"reclaimPolicy,omitempty"`
	// VolumeBindingMode of the StorageClass (default WaitForFirstConsumer).
	// +kubebuilder:validation:Enum=WaitForFirstConsumer;Immediate
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="volumeBindingMode is immutable once set"
	// +optional
	VolumeBindingMode *string `json:"volumeBindingMode,omitempty"`
	// AdditionalParameters are added to the StorageClass parameters; LVMS-owned keys are refused.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="!('topolvm.io/device-class' in self) && !('csi.storage.k8s.io/fstype' in self)",message="additionalParameters may not set topolvm.io/device-class or csi.storage.k8s.io/fstype: LVMS manages them"
	// +optional
	AdditionalParameters map[string]string `json:"additionalParameters,omitempty"`
	// AdditionalLabels are added to the StorageClass.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	AdditionalLabels map[string]string `json:"additionalLabels,omitempty"`
}

// LVMStateType is the overall state of an LVMCluster or of a volume group on a node.
// +kubebuilder:validation:Enum=Progressing;Ready;Failed;Degraded;Unknown;""
type LVMStateType string

// States, as LVMS reports them.
const (
	LVMStatusProgressing LVMStateType = "Progressing"
	LVMStatusReady       LVMStateType = "Ready"
	LVMStatusFailed      LVMStateType = "Failed"
	LVMStatusDegraded    LVMStateType = "Degraded"
	LVMStatusUnknown     LVMStateType = "Unknown"
)

// LVMClusterStatus is what the operator observed.
type LVMClusterStatus struct {
	// Ready is true when state is Ready.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// State summarises the cluster: Ready, Progressing, Degraded, Failed or Unknown.
	// +optional
	State LVMStateType `json:"state,omitempty"`
	// Message explains a state other than Ready in one sentence.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DeviceClassStatuses lists every device class with the volume group state on each node.
	// +optional
	DeviceClassStatuses []DeviceClassStatus `json:"deviceClassStatuses,omitempty"`
	// Conditions (ResourcesAvailable, VolumeGroupsReady, ...).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeviceClassStatus is the per-node state of one device class.
type DeviceClassStatus struct {
	// Name of the device class.
	Name string `json:"name,omitempty"`
	// NodeStatus per node.
	NodeStatus []NodeStatus `json:"nodeStatus,omitempty"`
}

// NodeStatus is one node's volume group state.
type NodeStatus struct {
	// Node name.
	Node string `json:"node,omitempty"`
	// VGStatus of the device class's volume group on this node.
	VGStatus `json:",inline"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=lvmc
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LVMCluster is the LVMS v1 API: the device classes of a cluster. One per namespace.
type LVMCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LVMClusterSpec   `json:"spec,omitempty"`
	Status LVMClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// LVMClusterList is a list of LVMCluster.
type LVMClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LVMCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LVMCluster{}, &LVMClusterList{})
}
