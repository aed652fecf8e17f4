// Package provisioner does in the operator what the CSI sidecars do elsewhere, with no sidecar: it
// provisions PersistentVolumes for PVCs of StorageClasses whose provisioner is the TopoLVM driver (honouring
// WaitForFirstConsumer through the volume.kubernetes.io/selected-node annotation), deletes released
// volumes whose reclaim policy is Delete, grows volumes when a PVC asks for more (and hands the file system
// growth to the node through the FileSystemResizePending condition), takes and deletes snapshots for
// VolumeSnapshotContents of the driver, takes and deletes group snapshots for its
// VolumeGroupSnapshotContents (refusing volumes not claimed in the VolumeGroupSnapshot's namespace, with a
// Warning event on the VolumeGroupSnapshot), and publishes CSIStorageCapacity per node and StorageClass from
// the nodes' capacity annotations.
//
// It calls the CSI controller service in process. Every failure a user must act on — no space (naming
// the shortfall), a selected node that is gone, a missing StorageClass, an unsupported access mode — is an
// event on the PVC; everything is idempotent (objects are named after the PVC or snapshot UID) and retried
// with the controller's backoff.
package provisioner
