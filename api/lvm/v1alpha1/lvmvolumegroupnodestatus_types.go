package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VGStatusType is the state of one volume group on one node.
// +kubebuilder:validation:Enum=Progressing;Ready;Failed;Degraded
type VGStatusType string

// Volume group states, as LVMS reports them.
const (
	VGStatusProgressing VGStatusType = "Progressing"
	VGStatusReady       VGStatusType = "Ready"
	VGStatusFailed      VGStatusType = "Failed"
	VGStatusDegraded    VGStatusType = "Degraded"
)

// DeviceDiscoveryPolicyStatus says how the devices of a volume group were chosen.
// +kubebuilder:validation:Enum=Preconfigured;RuntimeDynamic;RuntimeStatic
type DeviceDiscoveryPolicyStatus string

// Discovery policy states.
const (
	DeviceDiscoveryPolicyPreconfigured  DeviceDiscoveryPolicyStatus = "Preconfigured"
	DeviceDiscoveryPolicyRuntimeDynamic DeviceDiscoveryPolicyStatus = "RuntimeDynamic"
	DeviceDiscoveryPolicyRuntimeStatic  DeviceDiscoveryPolicyStatus = "RuntimeStatic"
)

// VGStatus is one volume group on one node, in LVMS's shape.
type VGStatus struct {
	// Name of the volume group (= device class).
	Name string `json:"name,omitempty"`
	// Status of the volume group.
	// +optional
	Status VGStatusType `json:"status,omitempty"`
	// Reason explains a status other than Ready.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Devices are the physical volumes of the volume group as LVM names them.
	// +optional
	Devices []string `json:"devices,omitempty"`
	// Excluded devices with the reasons they were not used.
	// +optional
	Excluded []ExcludedDevice `json:"excluded,omitempty"`
	// DeviceDiscoveryPolicy in effect.
	// +kubebuilder:default=RuntimeStatic
	// +optional
	DeviceDiscoveryPolicy DeviceDiscoveryPolicyStatus `json:"deviceDiscoveryPolicy,omitempty"`
	// RAIDStatus of a RAID device class.
	// +optional
	RAIDStatus *RAIDStatus `json:"raidStatus,omitempty"`
}

// ExcludedDevice is a candidate device that was not used, with why. Reasons are sentences; ReasonCodes are
// the machine-readable codes of the same reasons in the same order (an additive extension of LVMS's shape).
type ExcludedDevice struct {
	// Name of the device (kernel path, for example /dev/sdb).
	Name string `json:"name"`
	// Reasons as sentences.
	Reasons []string `json:"reasons"`
	// ReasonCodes, one per reason, in the same order (for example ReadOnly, Mounted, ForeignSignature).
	// +optional
	ReasonCodes []string `json:"reasonCodes,omitempty"`
}

// RAIDHealth is the health of a RAID volume group or LV.
// +kubebuilder:validation:Enum=Healthy;Degraded;Failed
type RAIDHealth string

// RAIDStatus summarises RAID health on a node.
type RAIDStatus struct {
	// Status of the RAID LVs.
	Status RAIDHealth `json:"status,omitempty"`
	// MemberCount is the number of PVs.
	MemberCount int `json:"memberCount,omitempty"`
	// DegradedMemberCount is the number of missing PVs.
	DegradedMemberCount int `json:"degradedMemberCount,omitempty"`
	// MinSyncPercent over the RAID LVs.
	MinSyncPercent string `json:"minSyncPercent,omitempty"`
	// LVHealth per RAID LV.
	// +optional
	LVHealth []RAIDLVHealth `json:"lvHealth,omitempty"`
}

// RAIDLVHealth is one RAID LV's state.
type RAIDLVHealth struct {
	Name         string     `json:"name"`
	RAIDType     string     `json:"raidType,omitempty"`
	SyncPercent  string     `json:"syncPercent,omitempty"`
	HealthStatus RAIDHealth `json:"healthStatus,omitempty"`
}

// LVMVolumeGroupNodeStatusSpec keeps LVMS's shape: the node agent writes observed volume groups here because
// existing tooling reads them here. New readers should use LVMNode (v2alpha1) or .status.conditions.
type LVMVolumeGroupNodeStatusSpec struct {
	// LVMVGStatus is the state of every volume group of this node.
	// +optional
	LVMVGStatus []VGStatus `json:"nodeStatus,omitempty"`
}

// LVMVolumeGroupNodeStatusStatus carries KEP-1623 conditions (VolumeGroupsHealthy, DeviceClassesHealthy,
// LVMDConfigured) written by the node agent.
type LVMVolumeGroupNodeStatusStatus struct {
	// ObservedGeneration of the volume groups the agent acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions of the node.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced

// LVMVolumeGroupNodeStatus is the observed volume groups of one node; its name is the node's name.
type LVMVolumeGroupNodeStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LVMVolumeGroupNodeStatusSpec   `json:"spec,omitempty"`
	Status LVMVolumeGroupNodeStatusStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// LVMVolumeGroupNodeStatusList is a list of LVMVolumeGroupNodeStatus.
type LVMVolumeGroupNodeStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LVMVolumeGroupNodeStatus `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LVMVolumeGroupNodeStatus{}, &LVMVolumeGroupNodeStatusList{})
}
