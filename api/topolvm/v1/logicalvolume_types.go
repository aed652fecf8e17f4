package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LogicalVolumeSpec is TopoLVM's LogicalVolume spec, unchanged.
type LogicalVolumeSpec struct {
	// Name equals metadata.name (the CSI volume or snapshot name, for example pvc-<uid>).
	Name string `json:"name"`
	// NodeName is the node the LV lives on.
	NodeName string `json:"nodeName"`
	// Size of the LV.
	Size resource.Quantity `json:"size"`
	// DeviceClass; empty means the node's default device class.
	// +optional
	DeviceClass string `json:"deviceClass,omitempty"`
	// LvcreateOptionClass names extra lvcreate options from lvmd.yaml.
	// +optional
	LvcreateOptionClass string `json:"lvcreateOptionClass,omitempty"`
	// Source is the metadata.name of the LogicalVolume this one is a snapshot or clone of.
	// +optional
	Source string `json:"source,omitempty"`
	// AccessType of a snapshot or clone: "ro" (snapshot) or "rw" (clone/restore). Only with source.
	// +optional
	AccessType string `json:"accessType,omitempty"`
}

// LogicalVolumeStatus is TopoLVM's LogicalVolume status, unchanged.
type LogicalVolumeStatus struct {
	// VolumeID is the LV name in the VG (= metadata.uid) and the CSI volume ID.
	// +optional
	VolumeID string `json:"volumeID,omitempty"`
	// Code is a gRPC status code; 0 means OK.
	// +optional
	Code int32 `json:"code,omitempty"`
	// Message explains a non-zero code.
	// +optional
	Message string `json:"message,omitempty"`
	// CurrentSize is the LV's actual size.
	// +optional
	CurrentSize *resource.Quantity `json:"currentSize,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="DeviceClass",type=string,JSONPath=`.spec.deviceClass`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="VolumeID",type=string,JSONPath=`.status.volumeID`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LogicalVolume is one LV on one node, as TopoLVM defines it.
type LogicalVolume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LogicalVolumeSpec   `json:"spec,omitempty"`
	Status LogicalVolumeStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// LogicalVolumeList is a list of LogicalVolume.
type LogicalVolumeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LogicalVolume `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LogicalVolume{}, &LogicalVolumeList{})
}
