package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GroupSnapshotMemberLabel marks a snapshot LogicalVolume taken as a member of a group snapshot; its value is
// the LogicalVolumeGroupSnapshot's name. The node agent's LogicalVolume reconciler does not create such a
// volume: the group snapshot reconciler does, together with the group's other members, and then sets its
// status as for a single snapshot.
const GroupSnapshotMemberLabel = GroupName + "/group-snapshot"

// The VolumeGroupSnapshot a group is taken for: the CSI parameters of CreateVolumeGroupSnapshot that name it
// (the external-snapshotter's --extra-create-metadata keys; LVMS's in-process snapshotter always passes
// them), recorded on the LogicalVolumeGroupSnapshot under the annotations (the console shows them).
const (
	ParameterVolumeGroupSnapshotName       = "csi.storage.k8s.io/volumegroupsnapshot/name"
	ParameterVolumeGroupSnapshotNamespace  = "csi.storage.k8s.io/volumegroupsnapshot/namespace"
	AnnotationVolumeGroupSnapshotName      = GroupName + "/volume-group-snapshot-name"
	AnnotationVolumeGroupSnapshotNamespace = GroupName + "/volume-group-snapshot-namespace"
)

// GroupSnapshotMember is one volume of a group snapshot.
type GroupSnapshotMember struct {
	// Source is the metadata.name of the LogicalVolume to snapshot (a thin volume on spec.nodeName).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Source string `json:"source"`
	// Snapshot is the metadata.name of the snapshot LogicalVolume (spec.source = Source, accessType ro,
	// labelled with GroupSnapshotMemberLabel = this group's name) whose LV the group creates.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Snapshot string `json:"snapshot"`
}

// LogicalVolumeGroupSnapshotSpec is a crash-consistent snapshot of several thin volumes of one device
// class on one node. It cannot change once created.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: delete the LogicalVolumeGroupSnapshot and create a new one"
// +kubebuilder:validation:XValidation:rule="self.members.all(m, self.members.exists_one(o, o.source == m.source))",message="each source LogicalVolume may appear once in members; remove the duplicate"
// +kubebuilder:validation:XValidation:rule="self.members.all(m, self.members.exists_one(o, o.snapshot == m.snapshot))",message="each snapshot LogicalVolume may appear once in members; give every member its own snapshot name"
// +kubebuilder:validation:XValidation:rule="self.members.all(m, !self.members.exists(o, o.source == m.snapshot))",message="a snapshot LogicalVolume cannot also be a source of the same group"
type LogicalVolumeGroupSnapshotSpec struct {
	// NodeName is the node whose agent takes the group; every source lives there.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`
	// DeviceClass of every source (a thin device class); empty means the node's default device class.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	DeviceClass string `json:"deviceClass,omitempty"`
	// Members of the group: at least one, at most 32 (every member is suspended at once).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Members []GroupSnapshotMember `json:"members"`
}

// GroupSnapshotPhase is where a group snapshot stands.
// +kubebuilder:validation:Enum=Pending;Ready;Refused;Failed
type GroupSnapshotPhase string

// Phases of a LogicalVolumeGroupSnapshot.
const (
	// GroupSnapshotPending: the node agent has not taken the group yet.
	GroupSnapshotPending GroupSnapshotPhase = "Pending"
	// GroupSnapshotReady: every member's snapshot exists and its LogicalVolume has a volume ID.
	GroupSnapshotReady GroupSnapshotPhase = "Ready"
	// GroupSnapshotRefused: the group was checked and refused before anything was created or suspended.
	GroupSnapshotRefused GroupSnapshotPhase = "Refused"
	// GroupSnapshotFailed: taking the group failed; every origin was resumed and no member snapshot kept.
	GroupSnapshotFailed GroupSnapshotPhase = "Failed"
)

// LogicalVolumeGroupSnapshotStatus is the node agent's answer.
type LogicalVolumeGroupSnapshotStatus struct {
	// Phase is Pending, Ready, Refused or Failed; empty means Pending.
	// +optional
	Phase GroupSnapshotPhase `json:"phase,omitempty"`
	// Reason is a machine-readable word for a refusal or failure (for example ThickVolume, MixedThinPools,
	// SuspendDeadline).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says what went wrong and what to do.
	// +optional
	Message string `json:"message,omitempty"`
	// SuspendTime is how long the origins were suspended together (absent when nothing was suspended).
	// +optional
	SuspendTime *metav1.Duration `json:"suspendTime,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=lvgs
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="DeviceClass",type=string,JSONPath=`.spec.deviceClass`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Suspended",type=string,JSONPath=`.status.suspendTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LogicalVolumeGroupSnapshot asks one node's agent to snapshot several thin volumes crash-consistently
// together. The CSI controller creates it with its member snapshot LogicalVolumes; deleting it does not
// delete them (the controller deletes the members first).
type LogicalVolumeGroupSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LogicalVolumeGroupSnapshotSpec   `json:"spec"`
	Status LogicalVolumeGroupSnapshotStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// LogicalVolumeGroupSnapshotList is a list of LogicalVolumeGroupSnapshot.
type LogicalVolumeGroupSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LogicalVolumeGroupSnapshot `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LogicalVolumeGroupSnapshot{}, &LogicalVolumeGroupSnapshotList{})
}
