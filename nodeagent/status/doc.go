// Package status turns what the node agent observed into API status: LVMNode.status (v2alpha1) and
// LVMVolumeGroupNodeStatus (v1alpha1, LVMS's shape in spec.nodeStatus plus conditions in status), with the
// KEP-1623 conditions VolumeGroupsHealthy, DeviceClassesHealthy and LVMDConfigured, observedGeneration, and
// a lastTransitionTime that moves only when a condition's status changes. Everything here is a pure
// function of its inputs (no client), and every list is in a fixed order.
package status
