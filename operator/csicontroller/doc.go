// Package csicontroller is the CSI Controller service of the TopoLVM-compatible driver, backed by
// LogicalVolume objects: CreateVolume creates a cluster-scoped LogicalVolume named after the lower-cased
// CSI name and waits for the node agent's answer in its status (volume ID = the object's uid = LV name);
// DeleteVolume deletes it and waits until the node removed the LV and its finalizer. Clones and snapshot
// restores are LogicalVolumes with a source on the source's node and device class; snapshots are read-only
// thin snapshots. Group snapshots (GroupController) are a LogicalVolumeGroupSnapshot and one labelled
// snapshot LogicalVolume per member, taken together by the node agent; each member then restores and
// deletes as a single snapshot. Names, capabilities, the topology key topology.topolvm.io/node, size
// rounding (4096 bytes, 1 GiB default, minimum allocation per file system) and error codes are TopoLVM's.
// gRPC codes are produced here and only here for the controller side.
package csicontroller
