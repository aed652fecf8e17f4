package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LVMVolumeGroupSpec is one device class as the node agents see it. The operator writes it from the
// LVMCluster; manual objects get the same CEL checks as device classes.
// +kubebuilder:validation:XValidation:rule="!has(self.thinPoolConfig) || !has(self.raidConfig)",message="raidConfig and thinPoolConfig are mutually exclusive"
type LVMVolumeGroupSpec struct {
	// DeviceSelector chooses the devices of the volume group.
	// +optional
	DeviceSelector *DeviceSelector `json:"deviceSelector,omitempty"`
	// NodeSelector chooses the nodes.
	// +optional
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`
	// ThinPoolConfig of the thin pool, if the class is thin.
	// +optional
	ThinPoolConfig *ThinPoolConfig `json:"thinPoolConfig,omitempty"`
	// RAIDConfig of the class, if it is RAID.
	// +optional
	RAIDConfig *RAIDConfig `json:"raidConfig,omitempty"`
	// Default is true for the default device class.
	// +optional
	Default bool `json:"default,omitempty"`
	// DeviceDiscoveryPolicy as on the device class.
	// +optional
	DeviceDiscoveryPolicy *DeviceDiscoveryPolicy `json:"deviceDiscoveryPolicy,omitempty"`
	// DeviceAccessPolicy as on the device class, normalised (nodeLocal or shared).
	// +optional
	DeviceAccessPolicy DeviceAccessPolicy `json:"deviceAccessPolicy,omitempty"`
	// FilesystemType as on the device class.
	// +optional
	FilesystemType DeviceFilesystemType `json:"fstype,omitempty"`
}

// LVMVolumeGroupStatus is left empty, as in LVMS: per-node state lives in LVMVolumeGroupNodeStatus.
type LVMVolumeGroupStatus struct{}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced

// LVMVolumeGroup is one device class of an LVMCluster, named after it and owned by it.
type LVMVolumeGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LVMVolumeGroupSpec   `json:"spec,omitempty"`
	Status LVMVolumeGroupStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// LVMVolumeGroupList is a list of LVMVolumeGroup.
type LVMVolumeGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LVMVolumeGroup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LVMVolumeGroup{}, &LVMVolumeGroupList{})
}
