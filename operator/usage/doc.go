// Package usage finds what still uses a StorageClass — PersistentVolumeClaims and PersistentVolumes — so
// that deleting an LVMNodeSet or LVMCluster, or removing a set from one node, waits for them and says which
// ones, instead of pulling storage from under a workload. It indexes both kinds by storage class name in the operator's cache.
package usage
