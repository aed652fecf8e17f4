// Package lvmcluster is the v1alpha1 LVMCluster controller, with LVMS's semantics: one LVMCluster per
// namespace (a second one is refused in its status), one LVMVolumeGroup per device class, one
// LVMVolumeGroupNodeStatus per managed node, a StorageClass lvms-<device class> (and a VolumeSnapshotClass
// for thin classes), and LVMS's states Ready, Progressing, Degraded, Failed and Unknown with the conditions
// ResourcesAvailable and VolumeGroupsReady — plus NoConflicts, because a node managed by an LVMNodeSet is
// never managed by the LVMCluster too (see package claims). Nodes the LVMCluster may not manage are left out
// of its LVMVolumeGroups' node selectors, so node agents never act on them for v1.
//
// With configurationPolicy ExternalConfiguration no device class is managed: the node agents read the host's
// lvmd.yaml, and the status reports what they found in it.
package lvmcluster
