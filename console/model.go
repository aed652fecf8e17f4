package console

import (
	"time"

	"github.com/lvms-dev/lvms/console/explain"
)

// Ref names the object a piece of desired or actual state comes from.
type Ref struct {
	// API is the group/version, for example "lvm.topolvm.io/v2alpha1".
	API       string `json:"api"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String is "Kind namespace/name".
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// Health is the console's summary of a row: what a person should look at first.
type Health string

// Healths, from best to worst.
const (
	HealthOK      Health = "ok"
	HealthInfo    Health = "info"
	HealthWarning Health = "warning"
	HealthError   Health = "error"
	HealthUnknown Health = "unknown"
)

// Rank orders healths for sorting, worst highest.
func (h Health) Rank() int {
	switch h {
	case HealthError:
		return 4
	case HealthWarning:
		return 3
	case HealthUnknown:
		return 2
	case HealthInfo:
		return 1
	}
	return 0
}

// worse returns the worse of two healths.
func worse(a, b Health) Health {
	if b.Rank() > a.Rank() {
		return b
	}
	return a
}

// healthOf maps an explanation severity to a health.
func healthOf(s explain.Severity) Health {
	switch s {
	case explain.Error:
		return HealthError
	case explain.Warning:
		return HealthWarning
	}
	return HealthInfo
}

// severityOf is the explanation severity that reads as a health: a difference's explanation says as much
// alarm as its row does.
func severityOf(h Health) explain.Severity {
	switch h {
	case HealthError:
		return explain.Error
	case HealthWarning:
		return explain.Warning
	}
	return explain.Info
}

// Bytes is a size with its human form.
type Bytes struct {
	Value int64  `json:"bytes"`
	Human string `json:"human"`
}

// Difference is one place where actual state differs from desired state, with its explanation.
type Difference struct {
	Node        string `json:"node,omitempty"`
	VolumeGroup string `json:"volumeGroup,omitempty"`
	Device      string `json:"device,omitempty"`
	DeviceClass string `json:"deviceClass,omitempty"`
	// Desired and Actual say what the spec asks for and what the status says, in a few words each.
	Desired string `json:"desired"`
	Actual  string `json:"actual"`
	// Explanation of the difference (topic, reason code or condition).
	Explanation explain.Explanation `json:"explanation"`
	Health      Health              `json:"health"`
}

// Condition is a KEP-1623 condition with, when it is not True, its explanation.
type Condition struct {
	Type               string               `json:"type"`
	Status             string               `json:"status"`
	Reason             string               `json:"reason,omitempty"`
	Message            string               `json:"message,omitempty"`
	LastTransitionTime time.Time            `json:"lastTransitionTime,omitzero"`
	Explanation        *explain.Explanation `json:"explanation,omitempty"`
	// Object is the object whose status carries the condition, on a node (its LVMNode or an
	// LVMVolumeGroupNodeStatus); nil where there is only one object.
	Object *Ref `json:"object,omitempty"`
}

// Overview is the landing view: sets and clusters, nodes, device class capacity, and what differs.
type Overview struct {
	At        time.Time    `json:"at"`
	Cluster   string       `json:"cluster,omitempty"`
	User      string       `json:"user,omitempty"`
	Installed bool         `json:"installed"`
	Hidden    []HiddenKind `json:"hidden,omitempty"`
	// Owners are the LVMNodeSets and LVMClusters.
	Owners []OwnerSummary `json:"owners"`
	// Nodes, the worst health first, then the worst state (Degraded before Ready), then by name.
	Nodes []NodeSummary `json:"nodes"`
	// Capacity per device class over all nodes.
	Capacity []Capacity `json:"capacity"`
	// Differences over all nodes and device classes, worst first.
	Differences []Difference `json:"differences"`
	Totals      Totals       `json:"totals"`
}

// Totals counts what the overview shows.
type Totals struct {
	Nodes         int `json:"nodes"`
	NodesReady    int `json:"nodesReady"`
	NodesDiffer   int `json:"nodesDiffer"`
	VolumeGroups  int `json:"volumeGroups"`
	DevicesInUse  int `json:"devicesInUse"`
	Excluded      int `json:"excluded"`
	Missing       int `json:"missing"`
	Volumes       int `json:"volumes"`
	DeviceClasses int `json:"deviceClasses"`
}

// OwnerSummary is an LVMNodeSet or an LVMCluster.
type OwnerSummary struct {
	Ref        Ref         `json:"ref"`
	State      string      `json:"state"`
	Message    string      `json:"message,omitempty"`
	Desired    int         `json:"desiredNodes"`
	Ready      int         `json:"readyNodes"`
	Health     Health      `json:"health"`
	Conditions []Condition `json:"conditions,omitempty"`
}

// NodeSummary is one node in the overview.
type NodeSummary struct {
	Name         string `json:"name"`
	State        string `json:"state"`
	Message      string `json:"message,omitempty"`
	Health       Health `json:"health"`
	Owners       []Ref  `json:"owners"`
	VolumeGroups int    `json:"volumeGroups"`
	DevicesInUse int    `json:"devicesInUse"`
	Excluded     int    `json:"excluded"`
	Missing      int    `json:"missing"`
	Differences  int    `json:"differences"`
}

// NodeView is one node: desired vs actual per volume group and device, device classes, capacity,
// conditions and events.
type NodeView struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
	Health  Health `json:"health"`
	// NodeExists is false when there is no Kubernetes Node of this name.
	NodeExists bool `json:"nodeExists"`
	// Owners are the sets and clusters that give this node storage.
	Owners []Ref `json:"owners"`
	// Objects are the per-node objects read (LVMNode, LVMVolumeGroupNodeStatus) with their generations.
	Objects       []NodeObject      `json:"objects"`
	VolumeGroups  []VolumeGroupView `json:"volumeGroups"`
	DeviceClasses []NodeDeviceClass `json:"deviceClasses"`
	Capacity      []Capacity        `json:"capacity"`
	// SharedLocking is the node's lock managers for shared volume groups; nil on a node without any.
	SharedLocking *SharedLockingView `json:"sharedLocking,omitempty"`
	Conditions    []Condition        `json:"conditions,omitempty"`
	Differences   []Difference       `json:"differences"`
	Events        []EventView        `json:"events,omitempty"`
	Volumes       []VolumeView       `json:"volumes,omitempty"`
	// GroupSnapshots are the node's group snapshots with their members.
	GroupSnapshots []GroupSnapshotView `json:"groupSnapshots,omitempty"`
	Hidden         []HiddenKind        `json:"hidden,omitempty"`
	At             time.Time           `json:"at"`
}

// SharedLockingView is a node's lock managers for shared volume groups (sanlock and lvmlockd), as its node
// agent reports them.
type SharedLockingView struct {
	// Mode: Host (the host runs them), Agent (the node agent runs them) or NotRunning.
	Mode string `json:"mode"`
	// HostID is the node's sanlock host ID, 0 until it has one.
	HostID int32 `json:"hostID,omitempty"`
	// HostIDAlsoOn are the other nodes that report the same host ID (a conflict).
	HostIDAlsoOn []string `json:"hostIDAlsoOn,omitempty"`
	// Watchdog tells whether sanlock uses a watchdog; Fencing is the agent's sentence on what that means.
	Watchdog bool   `json:"watchdog"`
	Fencing  string `json:"fencing,omitempty"`
	// Message says why a lock manager is not running.
	Message string `json:"message,omitempty"`
	Health  Health `json:"health"`
	// Findings are what is wrong with the lock managers; the node's differences list them too.
	Findings []Difference `json:"findings,omitempty"`
}

// NodeObject is a per-node object and how far its status has caught up with its spec.
type NodeObject struct {
	Ref                Ref   `json:"ref"`
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration"`
	// Stale is true when the status describes an older spec.
	Stale bool `json:"stale"`
}

// Generations says the object's generation and the one its status describes, as a clause.
func (o NodeObject) Generations() string {
	return o.Ref.String() + " generation " + itoa(o.Generation) + ", status of generation " + itoa(o.ObservedGeneration)
}

// DeviceState is what happened to a device.
type DeviceState string

// Device states.
const (
	// DeviceInVG: a physical volume of the volume group.
	DeviceInVG DeviceState = "in-vg"
	// DeviceWiped: in the volume group, and wiped by LVMS first on request.
	DeviceWiped DeviceState = "wiped"
	// DeviceExcluded: a candidate that is not used, with reasons.
	DeviceExcluded DeviceState = "excluded"
	// DeviceMissing: named by the spec but not on the node (NotFound) or not reported at all.
	DeviceMissing DeviceState = "missing"
	// DeviceUnexpected: in the volume group but not named by the spec.
	DeviceUnexpected DeviceState = "unexpected"
	// DeviceUnresolved: a /dev/disk/ link the selector names that the status does not resolve to a device
	// (it lists excluded devices, and every v1alpha1 device, by kernel name only).
	DeviceUnresolved DeviceState = "unresolved"
	// DeviceUnlisted: a LUN a shared volume group's selector names. The node agent's shared path runs no
	// device filters and lists no LUNs; the volume group's state and lockspace say whether the node uses it.
	DeviceUnlisted DeviceState = "unlisted"
)

// VolumeGroupView is one volume group on one node: the desired selector and devices vs the actual ones.
type VolumeGroupView struct {
	Name   string `json:"name"`
	Source Ref    `json:"source"`
	// Desired describes the selector in a line ("kname In [/dev/sdb /dev/sdc]").
	Desired      string `json:"desired"`
	AccessPolicy string `json:"accessPolicy,omitempty"`
	ForceWipe    bool   `json:"forceWipe,omitempty"`
	// InSpec is false for a reported volume group the spec does not have; Reported is false for a desired
	// one the agent does not report.
	InSpec   bool        `json:"inSpec"`
	Reported bool        `json:"reported"`
	State    string      `json:"state"`
	Message  string      `json:"message,omitempty"`
	Size     *Bytes      `json:"size,omitempty"`
	Free     *Bytes      `json:"free,omitempty"`
	Devices  []DeviceRow `json:"devices"` // brief views (the overview's) keep only the rows that differ
	counts   deviceCounts
	Pools    []ThinPool   `json:"thinPools,omitempty"`
	Differs  bool         `json:"differs"`
	Health   Health       `json:"health"`
	Notes    []string     `json:"notes,omitempty"`
	Topic    *Explanation `json:"explanation,omitempty"`
	// Lockspace (Joined or NotJoined) and InitializedBy (the node that created it) of a shared volume group.
	Lockspace     string `json:"lockspace,omitempty"`
	InitializedBy string `json:"initializedBy,omitempty"`
	// ActiveVolumes are the volumes of a shared volume group active (staged) on this node, by name.
	ActiveVolumes []ActiveVolume `json:"activeVolumes,omitempty"`
}

// ActiveVolume is a volume of a shared volume group active on a node, as its node agent reports it.
type ActiveVolume struct {
	// Name is the LV's name, which is the CSI volume ID.
	Name string `json:"name"`
	// Mode is Exclusive or Shared.
	Mode string `json:"mode"`
	// LogicalVolume is the LogicalVolume of that volume ID (named as its PersistentVolume), empty when the
	// snapshot has none.
	LogicalVolume string `json:"logicalVolume,omitempty"`
}

// Explanation is an alias so the view types read naturally.
type Explanation = explain.Explanation

// DeviceRow is one device of a volume group: desired vs actual.
type DeviceRow struct {
	KName string      `json:"kname"`
	Path  string      `json:"path,omitempty"`
	State DeviceState `json:"state"`
	// Desired says how the spec refers to the device ("named in selector", "optional path", "matched by
	// selector", "not in spec").
	Desired string `json:"desired"`
	// Actual says what the agent reports ("physical volume", "excluded: ReadOnly", "not reported").
	Actual  string     `json:"actual"`
	Size    *Bytes     `json:"size,omitempty"`
	Wiped   *time.Time `json:"wiped,omitempty"`
	Reasons []Reason   `json:"reasons,omitempty"`
	Differs bool       `json:"differs"`
	Health  Health     `json:"health"`
	// Topic explains a difference that is not a reason code (unexpected, not reported).
	Topic *Explanation `json:"explanation,omitempty"`
}

// Reason is one exclusion reason: the agent's sentence, its code and the console's explanation.
type Reason struct {
	Code        string      `json:"code"`
	Sentence    string      `json:"sentence"`
	Explanation Explanation `json:"explanation"`
}

// ThinPool is a thin pool with its usage.
type ThinPool struct {
	Name            string   `json:"name"`
	Size            *Bytes   `json:"size,omitempty"`
	DataPercent     *float64 `json:"dataPercent,omitempty"`
	MetadataPercent *float64 `json:"metadataPercent,omitempty"`
	// DataThreshold and MetadataThreshold are the device class's usage thresholds (percent; the defaults
	// when the status has none): at them no new volume is placed on the pool.
	DataThreshold     float64      `json:"dataThreshold"`
	MetadataThreshold float64      `json:"metadataThreshold"`
	Attributes        string       `json:"attributes,omitempty"`
	Reported          bool         `json:"reported"`
	Health            Health       `json:"health"`
	Findings          []Difference `json:"findings,omitempty"`
}

// DeviceView is one device on one node, in every volume group that considered it, with every filter's
// verdict.
type DeviceView struct {
	Node    string        `json:"node"`
	KName   string        `json:"kname"`
	Entries []DeviceEntry `json:"entries"`
	Health  Health        `json:"health"`
	At      time.Time     `json:"at"`
}

// DeviceEntry is the device as one volume group sees it.
type DeviceEntry struct {
	VolumeGroup string    `json:"volumeGroup"`
	Source      Ref       `json:"source"`
	Row         DeviceRow `json:"row"`
	Verdicts    []Verdict `json:"verdicts"`
}

// Verdict is one filter's outcome for a device.
type Verdict struct {
	Code   string `json:"code"`
	Filter string `json:"filter"`
	// Outcome is "passed", "excluded" or "not evaluated".
	Outcome  string `json:"outcome"`
	Sentence string `json:"sentence,omitempty"`
}

// Verdict outcomes.
const (
	OutcomePassed       = "passed"
	OutcomeExcluded     = "excluded"
	OutcomeNotEvaluated = "not evaluated"
)

// NodeDeviceClass is a device class on one node.
type NodeDeviceClass struct {
	Name          string      `json:"name"`
	Source        Ref         `json:"source"`
	VolumeGroup   string      `json:"volumeGroup"`
	Strategy      string      `json:"strategy"`
	State         string      `json:"state"`
	Message       string      `json:"message,omitempty"`
	StorageClass  *ClassCheck `json:"storageClass,omitempty"`
	SnapshotClass *ClassCheck `json:"snapshotClass,omitempty"`
	Capacity      *Capacity   `json:"capacity,omitempty"`
	Health        Health      `json:"health"`
}

// ClassCheck compares a generated class as the agent reports it with the cluster.
type ClassCheck struct {
	Name string `json:"name"`
	// Reported is the state in the node status (Exists/Missing), empty when not reported.
	Reported string `json:"reported,omitempty"`
	// InCluster is true when a class of that name exists.
	InCluster bool `json:"inCluster"`
	// Unknown says why whether the class exists cannot be known (the console may not read, or the cluster
	// does not serve, classes of its kind, and no agent reported it); InCluster and Differs are false then.
	Unknown string `json:"unknown,omitempty"`
	// Matches is true when it provisions from this device class.
	Matches bool         `json:"matches"`
	Differs bool         `json:"differs"`
	Topic   *Explanation `json:"explanation,omitempty"`
}

// Capacity is the space of one device class, on one node or summed over nodes.
type Capacity struct {
	DeviceClass string `json:"deviceClass"`
	Node        string `json:"node,omitempty"`
	Strategy    string `json:"strategy"`
	Size        Bytes  `json:"size"`
	Used        Bytes  `json:"used"`
	Free        Bytes  `json:"free"`
	// Provisioned is the sum of the sizes of the volumes on the device class.
	Provisioned Bytes `json:"provisioned"`
	// Overprovisioned is true when Provisioned exceeds Size (thin pools).
	Overprovisioned bool `json:"overprovisioned"`
	// Known is false when nothing reported a size.
	Known bool `json:"known"`
	// From says where the figures come from ("volume group vg1", "thin pool pool", "capacity annotation").
	From string `json:"from,omitempty"`
	// Reason says why the size is not known, when it is not.
	Reason string `json:"reason,omitempty"`
	// Unusable is free space no volume can be given now: on nodes where the device class is not ready
	// (usableOnly). Free does not count it.
	Unusable Bytes `json:"unusable,omitzero"`
	// UnusableReason says why, per node ("<node>: <the class's state and message>").
	UnusableReason string `json:"unusableReason,omitempty"`
	Nodes          int    `json:"nodes,omitempty"`
}

// DeviceClassView is a device class over all nodes: its classes and per-node state.
type DeviceClassView struct {
	Name          string            `json:"name"`
	Source        Ref               `json:"source"`
	VolumeGroup   string            `json:"volumeGroup"`
	Strategy      string            `json:"strategy"`
	Default       bool              `json:"default"`
	StorageClass  *ClassCheck       `json:"storageClass,omitempty"`
	SnapshotClass *ClassCheck       `json:"snapshotClass,omitempty"`
	Nodes         []NodeDeviceClass `json:"nodes"`
	Capacity      Capacity          `json:"capacity"`
	Health        Health            `json:"health"`
	Differences   []Difference      `json:"differences,omitempty"`
}

// VolumeView is a LogicalVolume followed to its PersistentVolume, claim and pods.
type VolumeView struct {
	Name         string       `json:"name"`
	Node         string       `json:"node"`
	DeviceClass  string       `json:"deviceClass"`
	Size         Bytes        `json:"size"`
	CurrentSize  *Bytes       `json:"currentSize,omitempty"`
	VolumeID     string       `json:"volumeID,omitempty"`
	Message      string       `json:"message,omitempty"`
	PV           string       `json:"pv,omitempty"`
	PVPhase      string       `json:"pvPhase,omitempty"`
	StorageClass string       `json:"storageClass,omitempty"`
	PVC          string       `json:"pvc,omitempty"`
	PVCPhase     string       `json:"pvcPhase,omitempty"`
	Pods         []string     `json:"pods,omitempty"`
	Health       Health       `json:"health"`
	Topic        *Explanation `json:"explanation,omitempty"`
	// SharedVolumeGroup is the volume group of a volume of the shared driver, which has no node; ActiveOn
	// are the nodes whose LVMNode reports it active, by node.
	SharedVolumeGroup string       `json:"sharedVolumeGroup,omitempty"`
	ActiveOn          []Activation `json:"activeOn,omitempty"`
	// ClaimNamespace and ClaimName name the claim of PVC; Move is its move to another node, nil when it
	// shows none.
	ClaimNamespace string    `json:"claimNamespace,omitempty"`
	ClaimName      string    `json:"claimName,omitempty"`
	Move           *MoveView `json:"move,omitempty"`
}

// Activation is a node where a shared volume is active, and how: Exclusive or Shared.
type Activation struct {
	Node string `json:"node"`
	Mode string `json:"mode"`
}

// EventView is an event about an LVMS object, node or volume.
type EventView struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Object  Ref       `json:"object"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	Health  Health    `json:"health"`
}
