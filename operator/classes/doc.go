// Package classes turns device classes of an LVMNodeSet or an LVMCluster into the StorageClasses and
// VolumeSnapshotClasses the operator generates, applies them with server-side apply, and prunes the ones
// no longer wanted. Cluster-scoped objects cannot be owned by namespaced ones, so ownership is the
// names.Owner* labels.
package classes
