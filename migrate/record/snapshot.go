package record

// Snapshot is the storage of the migrated nodes as the API shows it. Everything is sorted, so two
// snapshots compare field by field.
type Snapshot struct {
	Nodes             []NodeStorage      `json:"nodes"`
	LogicalVolumes    []LogicalVolume    `json:"logicalVolumes,omitempty"`
	PersistentVolumes []PersistentVolume `json:"persistentVolumes,omitempty"`
	StorageClasses    []Class            `json:"storageClasses,omitempty"`
	SnapshotClasses   []Class            `json:"snapshotClasses,omitempty"`
}

// NodeStorage is one node's volume groups and free capacity per device class (the node's
// capacity.topolvm.io annotations, which the scheduler uses).
type NodeStorage struct {
	Name         string            `json:"name"`
	VolumeGroups []VolumeGroup     `json:"volumeGroups"`
	Capacity     map[string]string `json:"capacity,omitempty"`
}

// VolumeGroup is one volume group: its physical volumes and thin pools.
type VolumeGroup struct {
	Name      string   `json:"name"`
	Devices   []string `json:"devices,omitempty"`
	ThinPools []string `json:"thinPools,omitempty"`
}

// LogicalVolume is a TopoLVM LogicalVolume: the LV name is VolumeID.
type LogicalVolume struct {
	Name        string `json:"name"`
	UID         string `json:"uid"`
	Node        string `json:"node"`
	DeviceClass string `json:"deviceClass,omitempty"`
	Size        string `json:"size"`
	VolumeID    string `json:"volumeID,omitempty"`
}

// PersistentVolume is a PV of one of the migrated StorageClasses.
type PersistentVolume struct {
	Name         string `json:"name"`
	UID          string `json:"uid"`
	StorageClass string `json:"storageClass"`
	Node         string `json:"node,omitempty"`
	Capacity     string `json:"capacity"`
	Claim        string `json:"claim,omitempty"`
}

// Class is a StorageClass or VolumeSnapshotClass: the same object (UID) with the same parameters.
type Class struct {
	Name        string            `json:"name"`
	UID         string            `json:"uid"`
	Provisioner string            `json:"provisioner"`
	Parameters  map[string]string `json:"parameters,omitempty"`
}
