package v2alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// LVMNodeSpec is the desired storage of one node. LVMNodeSet.spec.template has the same shape.
// +kubebuilder:validation:XValidation:rule="!has(self.deviceClasses) || self.deviceClasses.all(d, has(self.volumeGroups) && self.volumeGroups.exists(v, v.name == d.volumeGroup))",message="every deviceClasses[].volumeGroup must name a volume group defined in volumeGroups"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceClasses) || self.deviceClasses.filter(d, has(d.default) && d.default).size() <= 1",message="at most one device class may set default: true; unset default on all but one device class"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceClasses) || !has(self.volumeGroups) || self.deviceClasses.all(d, !self.volumeGroups.exists(v, v.name == d.volumeGroup && has(v.accessPolicy) && v.accessPolicy == 'Shared') || (d.strategy == 'Thick' && !has(d.fstype)))",message="device classes on a Shared volume group must use strategy: Thick and no fstype: shared volumes are linear raw block devices"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceClasses) || self.deviceClasses.all(a, a.strategy != 'Thin' || self.deviceClasses.all(b, a.name == b.name || b.strategy != 'Thin' || a.volumeGroup != b.volumeGroup || a.thin.poolName != b.thin.poolName))",message="two Thin device classes on the same volume group need different thin.poolName values"
// +kubebuilder:validation:XValidation:rule="!has(self.deviceClasses) || self.deviceClasses.all(a, a.strategy != 'Thick' || self.deviceClasses.all(b, a.name == b.name || b.strategy != 'Thick' || a.volumeGroup != b.volumeGroup))",message="two Thick device classes cannot share a volume group: each would count the group's free space as its own (lvmd refuses it); give the second class its own volume group, or make it Thin with its own pool"
type LVMNodeSpec struct {
	// VolumeGroups to build on the node, each from the devices its selector picks.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	VolumeGroups []VolumeGroup `json:"volumeGroups,omitempty"`

	// DeviceClasses are what volumes are provisioned from: a volume group, thick or thin, with its
	// StorageClass and VolumeSnapshotClass. Several device classes may share a volume group: one Thick
	// class and any number of Thin classes, each with its own pool.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	DeviceClasses []DeviceClass `json:"deviceClasses,omitempty"`

	// LVMD configures the node's lvmd endpoint.
	// +optional
	LVMD *LVMDConfig `json:"lvmd,omitempty"`
}

// AccessPolicy says where a volume group's devices live.
// +kubebuilder:validation:Enum=NodeLocal;Shared
type AccessPolicy string

const (
	// AccessPolicyNodeLocal (default): one volume group per node on that node's own devices.
	AccessPolicyNodeLocal AccessPolicy = "NodeLocal"
	// AccessPolicyShared: one volume group on a LUN every selected node sees (Subprovisioner, seed 001).
	AccessPolicyShared AccessPolicy = "Shared"
)

// VolumeGroup is an LVM volume group and the devices it is built from.
// +kubebuilder:validation:XValidation:rule="has(oldSelf.accessPolicy) == has(self.accessPolicy) && (!has(self.accessPolicy) || oldSelf.accessPolicy == self.accessPolicy)",message="accessPolicy is immutable: changing it would rebuild the volume group; define a new volume group instead"
// +kubebuilder:validation:XValidation:rule="!has(self.forceWipeDevicesAndDestroyAllData) || !self.forceWipeDevicesAndDestroyAllData || self.deviceSelector.deviceSelectorTerms.all(t, t.matchExpressions.exists(e, (e.key == 'path' || e.key == 'kname') && e.operator == 'In'))",message="forceWipeDevicesAndDestroyAllData needs every deviceSelectorTerm to name its devices explicitly (key path or kname with operator In): LVMS never wipes devices it discovered by pattern"
// +kubebuilder:validation:XValidation:rule="!has(self.accessPolicy) || self.accessPolicy != 'Shared' || !has(self.forceWipeDevicesAndDestroyAllData) || !self.forceWipeDevicesAndDestroyAllData",message="forceWipeDevicesAndDestroyAllData is not allowed on a Shared volume group: every node would wipe the same LUN; wipe it once by hand from one node"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.forceWipeDevicesAndDestroyAllData) && oldSelf.forceWipeDevicesAndDestroyAllData) == (has(self.forceWipeDevicesAndDestroyAllData) && self.forceWipeDevicesAndDestroyAllData)",message="forceWipeDevicesAndDestroyAllData is immutable after creation"
type VolumeGroup struct {
	// Name of the LVM volume group.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="volume group name must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`

	// DeviceSelector picks the devices of the volume group.
	DeviceSelector DeviceSelector `json:"deviceSelector"`

	// AccessPolicy NodeLocal (default) or Shared. Immutable.
	// +optional
	AccessPolicy AccessPolicy `json:"accessPolicy,omitempty"`

	// ForceWipeDevicesAndDestroyAllData wipes every signature from the selected devices once, before use.
	// Only devices named explicitly (path or kname In) may be wiped; the wipe is recorded per node and never
	// repeated; a mounted device or one holding one of our volume groups is never wiped.
	// +optional
	ForceWipeDevicesAndDestroyAllData *bool `json:"forceWipeDevicesAndDestroyAllData,omitempty"`
}

// DeviceSelector picks devices with terms, like a NodeSelector picks nodes: the terms are ORed, the
// expressions of one term are ANDed.
type DeviceSelector struct {
	// DeviceSelectorTerms; a device matching any term is selected.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	DeviceSelectorTerms []DeviceSelectorTerm `json:"deviceSelectorTerms"`
}

// DeviceSelectorTerm matches a device when all its expressions match.
type DeviceSelectorTerm struct {
	// MatchExpressions, ANDed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	MatchExpressions []DeviceSelectorRequirement `json:"matchExpressions"`
}

// DeviceSelectorKey is a device property a selector can test.
//
//   - kname: kernel device path (/dev/sdb, /dev/dm-3, /dev/nvme0n1p2); /dev/mapper/<name> is accepted too.
//   - path: any path of the device, including /dev/disk/by-id, by-path, by-uuid, by-partlabel links.
//   - serial, wwn, model, vendor, partlabel: as lsblk reports them (exact string).
//   - size: device size in bytes; values are quantities (Gt/Lt compare, In matches exact sizes).
//   - rotational: "true" or "false".
//   - type: lsblk type (disk, part, loop, mpath, raid1, crypt, lvm, ...).
//
// +kubebuilder:validation:Enum=kname;path;serial;wwn;model;vendor;partlabel;size;rotational;type
type DeviceSelectorKey string

// Device selector keys.
const (
	KeyKName      DeviceSelectorKey = "kname"
	KeyPath       DeviceSelectorKey = "path"
	KeySerial     DeviceSelectorKey = "serial"
	KeyWWN        DeviceSelectorKey = "wwn"
	KeyModel      DeviceSelectorKey = "model"
	KeyVendor     DeviceSelectorKey = "vendor"
	KeyPartLabel  DeviceSelectorKey = "partlabel"
	KeySize       DeviceSelectorKey = "size"
	KeyRotational DeviceSelectorKey = "rotational"
	KeyType       DeviceSelectorKey = "type"
)

// DeviceSelectorOperator relates a key to values.
//
//   - In / NotIn: the property equals one / none of the values.
//   - Exists / DoesNotExist: the property is / is not reported (non-empty).
//   - Any: every device matches, whatever the key (the seed's wildcard volume group).
//   - Gt / Lt: size only, one quantity value ("100Gi").
//
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Any;Gt;Lt
type DeviceSelectorOperator string

// Device selector operators.
const (
	OpIn           DeviceSelectorOperator = "In"
	OpNotIn        DeviceSelectorOperator = "NotIn"
	OpExists       DeviceSelectorOperator = "Exists"
	OpDoesNotExist DeviceSelectorOperator = "DoesNotExist"
	OpAny          DeviceSelectorOperator = "Any"
	OpGt           DeviceSelectorOperator = "Gt"
	OpLt           DeviceSelectorOperator = "Lt"
)

// DeviceSelectorRequirement is one test of a device property.
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",message="operators In and NotIn need at least one value"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Exists', 'DoesNotExist', 'Any']) || !has(self.values) || size(self.values) == 0",message="operators Exists, DoesNotExist and Any take no values; remove values"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Gt', 'Lt']) || self.key == 'size'",message="operators Gt and Lt only apply to key size"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Gt', 'Lt']) || (has(self.values) && size(self.values) == 1)",message="operators Gt and Lt need exactly one value, a quantity such as 100Gi"
// +kubebuilder:validation:XValidation:rule="self.key != 'size' || !has(self.values) || self.values.all(v, isQuantity(v))",message="size values must be quantities such as 500Gi or 1Ti"
// +kubebuilder:validation:XValidation:rule="self.key != 'rotational' || !has(self.values) || self.values.all(v, v == 'true' || v == 'false')",message="rotational values must be \"true\" or \"false\""
// +kubebuilder:validation:XValidation:rule="!(self.key in ['kname', 'path']) || !has(self.values) || self.values.all(v, v.startsWith('/dev/') && !v.contains('/../'))",message="kname and path values must be absolute paths under /dev/ without '..'"
type DeviceSelectorRequirement struct {
	// Key is the device property.
	Key DeviceSelectorKey `json:"key"`
	// Operator relates the key to the values.
	Operator DeviceSelectorOperator `json:"operator"`
	// Values, as the operator needs them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=255
	Values []string `json:"values,omitempty"`
}

// DeviceClassStrategy says how volumes are allocated.
// +kubebuilder:validation:Enum=Thin;Thick
type DeviceClassStrategy string

// Strategies.
const (
	StrategyThin  DeviceClassStrategy = "Thin"
	StrategyThick DeviceClassStrategy = "Thick"
)

// FilesystemType is the filesystem of a device class's filesystem volumes. btrfs is v2 only (v1alpha1 keeps
// LVMS's xfs and ext4); the CSI node service formats and grows all three.
// +kubebuilder:validation:Enum=xfs;ext4;btrfs
type FilesystemType string

// DeviceClass is what volumes are provisioned from.
// +kubebuilder:validation:XValidation:rule="self.strategy == 'Thin' ? has(self.thin) : !has(self.thin)",message="strategy Thin needs the thin section (poolName, sizePercent, overprovisionRatio); strategy Thick must not have one"
// +kubebuilder:validation:XValidation:rule="oldSelf.volumeGroup == self.volumeGroup",message="volumeGroup is immutable: the device class's volumes live in that volume group; create a new device class instead"
// +kubebuilder:validation:XValidation:rule="oldSelf.strategy == self.strategy",message="strategy is immutable: existing volumes were allocated with it; create a new device class instead"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.fstype) ? oldSelf.fstype : 'xfs') == (has(self.fstype) ? self.fstype : 'xfs')",message="fstype is immutable: existing volumes keep their filesystem; create a new device class for another filesystem"
type DeviceClass struct {
	// Name of the device class (topolvm.io/device-class in StorageClass parameters).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="device class name must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit"
	Name string `json:"name"`

	// Strategy Thin or Thick. Immutable.
	Strategy DeviceClassStrategy `json:"strategy"`

	// VolumeGroup the device class allocates from; must be defined in volumeGroups. Immutable.
	// +kubebuilder:validation:MaxLength=63
	VolumeGroup string `json:"volumeGroup"`

	// Default makes this the cluster's default StorageClass. At most one device class may be default.
	// +optional
	Default bool `json:"default,omitempty"`

	// Thin pool settings, required for strategy Thin.
	// +optional
	Thin *ThinConfig `json:"thin,omitempty"`

	// FilesystemType of filesystem volumes (default xfs); must be empty on a Shared volume group. Immutable.
	// +optional
	FilesystemType FilesystemType `json:"fstype,omitempty"`

	// StorageClass naming and options.
	// +optional
	StorageClass *StorageClassTemplate `json:"storageClass,omitempty"`

	// SnapshotClass naming (thin device classes only get a VolumeSnapshotClass).
	// +optional
	SnapshotClass *SnapshotClassTemplate `json:"snapshotClass,omitempty"`
}

// ThinConfig describes the thin pool of a Thin device class.
// +kubebuilder:validation:XValidation:rule="oldSelf.poolName == self.poolName",message="thin.poolName is immutable: renaming would orphan the pool and its volumes"
// +kubebuilder:validation:XValidation:rule="oldSelf.sizePercent == self.sizePercent",message="thin.sizePercent is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.chunkSize) || quantity(self.chunkSize).compareTo(quantity('64Ki')) >= 0",message="thin.chunkSize must be between 64Ki and 1Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.chunkSize) || quantity(self.chunkSize).compareTo(quantity('1Gi')) <= 0",message="thin.chunkSize must be between 64Ki and 1Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.metadataSize) || quantity(self.metadataSize).compareTo(quantity('2Mi')) >= 0",message="thin.metadataSize must be between 2Mi and 16Gi"
// +kubebuilder:validation:XValidation:rule="!has(self.metadataSize) || quantity(self.metadataSize).compareTo(quantity('16Gi')) <= 0",message="thin.metadataSize must be between 2Mi and 16Gi"
type ThinConfig struct {
	// PoolName of the thin pool LV.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z0-9+_.][a-zA-Z0-9+_.-]*$')",message="thin.poolName may contain letters, digits and + _ . - and must not start with '-'"
	PoolName string `json:"poolName"`

	// SizePercent of the volume group given to the pool (10-100, default 90). Immutable.
	// +kubebuilder:default=90
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=100
	// +optional
	SizePercent int32 `json:"sizePercent,omitempty"`

	// OverprovisionRatio: how many times the pool size may be promised to volumes (1-100, default 10).
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	OverprovisionRatio int32 `json:"overprovisionRatio,omitempty"`

	// ChunkSize of the pool (64Ki-1Gi); empty lets lvm2 choose. Immutable once the pool exists.
	// +optional
	ChunkSize *resource.Quantity `json:"chunkSize,omitempty"`

	// MetadataSize of the pool (2Mi-16Gi); empty lets lvm2 choose. May grow, never shrink.
	// +optional
	MetadataSize *resource.Quantity `json:"metadataSize,omitempty"`

	// AutoextendThreshold: when the pool's data is this full (50-100 percent, default 80), the node agent
	// grows the pool by autoextendPercent into the volume group's free space; 100 turns it off.
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=50
	// +kubebuilder:validation:Maximum=100
	// +optional
	AutoextendThreshold int32 `json:"autoextendThreshold,omitempty"`

	// AutoextendPercent the pool grows by each time (1-100 percent of its size, default 20).
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	AutoextendPercent int32 `json:"autoextendPercent,omitempty"`

	// DataUsageThreshold: once the pool's real data use reaches this percent (1-100, default 90), no new
	// volume, snapshot or growth is placed on it (existing volumes keep working), and the class's capacity
	// is at most what is left below it. A Warning event comes 10 points before.
	// +kubebuilder:default=90
	// +kubebuilder:validation:XValidation:rule="self > 0 && self <= 100",message="thin.dataUsageThreshold is a percentage: set it above 0 and at most 100 (default 90)"
	// +optional
	DataUsageThreshold int32 `json:"dataUsageThreshold,omitempty"`

	// MetadataUsageThreshold: the same for the pool's metadata (1-100, default 75). A pool whose metadata
	// fills turns read-only, so it stops earlier than data.
	// +kubebuilder:default=75
	// +kubebuilder:validation:XValidation:rule="self > 0 && self <= 100",message="thin.metadataUsageThreshold is a percentage: set it above 0 and at most 100 (default 75)"
	// +optional
	MetadataUsageThreshold int32 `json:"metadataUsageThreshold,omitempty"`
}

// NamingPolicy says how a generated class is named.
// +kubebuilder:validation:Enum=Prefixed;Explicit;None
type NamingPolicy string

// Naming policies.
const (
	// NamingPrefixed names the class <prefix>-<deviceClass> (prefix defaults to "lvms").
	NamingPrefixed NamingPolicy = "Prefixed"
	// NamingExplicit uses name as given (migration from v1 keeps lvms-<deviceClass> this way).
	NamingExplicit NamingPolicy = "Explicit"
	// NamingNone creates no class.
	NamingNone NamingPolicy = "None"
)

// StorageClassTemplate names and tunes the StorageClass of a device class.
// +kubebuilder:validation:XValidation:rule="!has(self.namingPolicy) || self.namingPolicy != 'Explicit' || has(self.name)",message="namingPolicy Explicit needs storageClass.name"
// +kubebuilder:validation:XValidation:rule="!has(self.name) || (has(self.namingPolicy) && self.namingPolicy == 'Explicit')",message="storageClass.name is only used with namingPolicy: Explicit"
type StorageClassTemplate struct {
	// NamingPolicy Prefixed (default), Explicit or None.
	// +kubebuilder:default=Prefixed
	// +optional
	NamingPolicy NamingPolicy `json:"namingPolicy,omitempty"`
	// Prefix for namingPolicy Prefixed (default "lvms").
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="prefix must be a DNS-1123 label"
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Name for namingPolicy Explicit.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="name must be a DNS-1123 subdomain"
	// +optional
	Name string `json:"name,omitempty"`
	// ReclaimPolicy of the StorageClass (default Delete).
	// +kubebuilder:validation:Enum=Delete;Retain
	// +optional
	ReclaimPolicy *corev1.PersistentVolumeReclaimPolicy `json:"reclaimPolicy,omitempty"`
	// VolumeBindingMode of the StorageClass (default WaitForFirstConsumer).
	// +kubebuilder:validation:Enum=WaitForFirstConsumer;Immediate
	// +optional
	VolumeBindingMode *string `json:"volumeBindingMode,omitempty"`
	// AdditionalParameters added to the StorageClass; LVMS-owned keys are refused.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="!('topolvm.io/device-class' in self) && !('csi.storage.k8s.io/fstype' in self)",message="additionalParameters may not set topolvm.io/device-class or csi.storage.k8s.io/fstype: LVMS manages them"
	// +optional
	AdditionalParameters map[string]string `json:"additionalParameters,omitempty"`
}

// SnapshotClassTemplate names the VolumeSnapshotClass of a Thin device class.
// +kubebuilder:validation:XValidation:rule="!has(self.namingPolicy) || self.namingPolicy != 'Explicit' || has(self.name)",message="namingPolicy Explicit needs snapshotClass.name"
// +kubebuilder:validation:XValidation:rule="!has(self.name) || (has(self.namingPolicy) && self.namingPolicy == 'Explicit')",message="snapshotClass.name is only used with namingPolicy: Explicit"
type SnapshotClassTemplate struct {
	// NamingPolicy Prefixed (default), Explicit or None.
	// +kubebuilder:default=Prefixed
	// +optional
	NamingPolicy NamingPolicy `json:"namingPolicy,omitempty"`
	// Prefix for namingPolicy Prefixed (default "lvms").
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="prefix must be a DNS-1123 label"
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Name for namingPolicy Explicit.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="name must be a DNS-1123 subdomain"
	// +optional
	Name string `json:"name,omitempty"`
	// DeletionPolicy of the VolumeSnapshotClass (default Delete).
	// +kubebuilder:validation:Enum=Delete;Retain
	// +optional
	DeletionPolicy string `json:"deletionPolicy,omitempty"`
}

// LVMDConfig configures the node's lvmd endpoint.
type LVMDConfig struct {
	// SocketName of the lvmd gRPC socket (default /run/topolvm/lvmd.sock).
	// +kubebuilder:validation:MaxLength=107
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="lvmd.socketName must be an absolute path"
	// +optional
	SocketName string `json:"socketName,omitempty"`
}
