// Package csinode is the CSI Identity and Node services of the TopoLVM-compatible driver and their
// transport: a gRPC server on a unix socket and a small kubelet plugin registrar (pluginregistration v1 on
// the plugins_registry socket), so no csi-node-driver-registrar sidecar is needed.
//
// Node publish does all the work (no NodeStage, as in TopoLVM): a filesystem volume is wiped of stray
// signatures, formatted when blank (mkfs.ext4 -F -m0, mkfs.xfs -f, mkfs.btrfs), mounted (xfs always with
// nouuid, so snapshots and clones of one file system mount side by side) and its directory made 2777; a
// block volume is the LV's device file bind-mounted on a file. Mounting, formatting and resizing go
// through k8s.io/mount-utils with an injectable mounter and exec, so tests run against fakes with state
// and the VM lane against the real tools. The device path comes from lvmd (lv_path), the device class
// from the LogicalVolume whose status.volumeID is the volume ID.
package csinode
