// Package csivm proves the CSI driver against a real kernel (e2e/vm): real lvm2 with thick and thin device
// classes, real mkfs (xfs, ext4), mount, bind mounts for block volumes, online growth of LVs and file
// systems, thin snapshots and restores with the data read back, and csi-sanity with the real backend.
// The Kubernetes side is controller-runtime's fake client (csidriver.StartFake): the guest has no API
// server; the envtest suites cover that side against lvmsim.
package csivm
