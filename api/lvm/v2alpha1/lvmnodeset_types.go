package v2alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderStrategy says who provides the CSI driver for the set's device classes.
// +kubebuilder:validation:Enum=ManagedTopoLVM;Unmanaged
type ProviderStrategy string

const (
	// ProviderManagedTopoLVM (default): LVMS deploys its TopoLVM-compatible driver (and the shared driver for
	// Shared volume groups), StorageClasses and VolumeSnapshotClasses.
	ProviderManagedTopoLVM ProviderStrategy = "ManagedTopoLVM"
	// ProviderUnmanaged: LVMS builds the volume groups and writes lvmd.yaml only; no classes are created.
	ProviderUnmanaged ProviderStrategy = "Unmanaged"
)

// Provider configures the CSI driver side of a set.
type Provider struct {
	// Strategy ManagedTopoLVM (default) or Unmanaged.
	// +kubebuilder:default=ManagedTopoLVM
	// +optional
	Strategy ProviderStrategy `json:"strategy,omitempty"`
}

// LVMNodeSetSpec selects nodes and gives them a template.
type LVMNodeSetSpec struct {
	// NodeSelector picks the nodes; without it, every node whose taints are tolerated.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`

	// Tolerations let the set (and its node agent) use tainted nodes.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Provider of the CSI driver.
	// +optional
	Provider Provider `json:"provider,omitempty"`

	// Template is copied into the spec of every LVMNode of the set.
	Template LVMNodeSpec `json:"template"`
}

// State is the summary state of an LVMNodeSet, an LVMNode or one of their parts.
// +kubebuilder:validation:Enum=Ready;Progressing;Degraded;Failed;Unknown;Healthy;Missing;Exists;Conflict;Deleting
type State string

// States. Sets and nodes use Ready/Progressing/Degraded/Failed/Unknown (and Conflict, Deleting); volume groups
// and device classes use Healthy/Progressing/Degraded/Failed/Missing; generated classes use Exists/Missing.
const (
	StateReady       State = "Ready"
	StateProgressing State = "Progressing"
	StateDegraded    State = "Degraded"
	StateFailed      State = "Failed"
	StateUnknown     State = "Unknown"
	StateHealthy     State = "Healthy"
	StateMissing     State = "Missing"
	StateExists      State = "Exists"
	StateConflict    State = "Conflict"
	StateDeleting    State = "Deleting"
)

// NodeSummary is one node's state in its set.
type NodeSummary struct {
	// Name of the node (and of its LVMNode).
	Name string `json:"name"`
	// State of the LVMNode.
	State State `json:"state"`
	// Message explains a state other than Ready.
	// +optional
	Message string `json:"message,omitempty"`
}

// ProviderStatus is the state of the CSI driver side of a set.
type ProviderStatus struct {
	// State of the provider.
	// +optional
	State State `json:"state,omitempty"`
	// Message explains a state other than Ready.
	// +optional
	Message string `json:"message,omitempty"`
}

// LVMNodeSetStatus aggregates the set's LVMNodes.
type LVMNodeSetStatus struct {
	// State: Ready when every node is Ready; Degraded when any node is not; Progressing while nodes are
	// being set up for the first time; Conflict when another set or an LVMCluster claims the same nodes.
	// +optional
	State State `json:"state,omitempty"`
	// Message explains a state other than Ready in one sentence.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DesiredNodes is the number of nodes the set selects.
	// +optional
	DesiredNodes int32 `json:"desiredNodes,omitempty"`
	// ReadyNodes is the number of those that are Ready.
	// +optional
	ReadyNodes int32 `json:"readyNodes,omitempty"`
	// Nodes lists every selected node, sorted by name; a set over more than 256 nodes lists only the nodes
	// that are not Ready (at most 256), so that its status stays small. The counts cover every node.
	// +optional
	Nodes []NodeSummary `json:"nodes,omitempty"`
	// Provider state.
	// +optional
	Provider ProviderStatus `json:"provider,omitempty"`
	// Conditions: LVMNodesReady, ProviderReady, NoConflicts.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=lvmns
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredNodes`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LVMNodeSet gives every node it selects the same storage template, like a DaemonSet.
type LVMNodeSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LVMNodeSetSpec   `json:"spec,omitempty"`
	Status LVMNodeSetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// LVMNodeSetList is a list of LVMNodeSet.
type LVMNodeSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LVMNodeSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LVMNodeSet{}, &LVMNodeSetList{})
}
