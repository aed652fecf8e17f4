// Package handover runs a planned v1alpha1 -> v2alpha1 migration (migrate/plan) against a cluster:
// Preflight, Apply (resumable, node by node), Verify and Rollback. It takes a controller-runtime client and
// a clock and holds no CLI or UI code; `lvms migrate` (cmd/lvms) and the consoles render its Progress and
// Check values.
//
// What the operator did before this package existed, and what changed (README "Migrating from LVMCluster"):
//   - Deleting an LVMCluster waited for every PVC/PV of its StorageClasses, deleted its StorageClasses and
//     VolumeSnapshotClasses, deleted its LVMVolumeGroups (each node agent then removes the volume group,
//     or keeps it and reports ManualCleanupRequired when LVs are left) and its node statuses. So a plain
//     delete blocks while volumes exist and removes the classes. lvmd.yaml entries are written by each agent
//     from the device classes it is asked for, so they go with the LVMVolumeGroups.
//     Now names.KeepStorageOnDeleteAnnotation changes that teardown: it waits until the LVMCluster manages
//     no node (all handed over), keeps the classes, does not wait for volumes, and disowns each
//     LVMVolumeGroup before deleting it, so no agent treats the deletion as a removal. The same mark on an
//     LVMNodeSet withdraws its part of each LVMNode before deleting it (rollback uses that).
//   - A set with namingPolicy Explicit did not adopt a StorageClass of the same name generated for the
//     LVMCluster: the ownership labels (names.OwnerKindLabel ...) said LVMCluster, so the set reported the
//     name as taken. Now a set migrated from the LVMCluster (names.MigratedFromAnnotation) adopts the
//     cluster's classes in place once the cluster manages none of its nodes, by re-labelling them (same
//     object, same UID; a class whose parameters differ is reported, never deleted and recreated), and the
//     LVMCluster applies the mirror rule, taking them back when a node is handed back.
//   - What stops an agent from wiping, pvcreating or vgcreating devices that already carry the volume
//     group: the agent merges the v1 and v2 desired states by volume group name (nodeagent/desired.Merge),
//     and converges an existing volume group that carries the lvms tag instead of creating it; devices
//     are wiped only with forceWipeDevicesAndDestroyAllData, which the plan never carries over. Apply does
//     not take this on trust: a node counts as handed over only when its LVMNode status shows the volume
//     groups Healthy with the devices v1 reported, the thin pools of the plan, and no device wiped since
//     the migration started.
//   - The node agents do not publish their version anywhere in the API, so Preflight cannot check that
//     they support adoption; it says so as a warning, and the per-node check above is the guard.
//
// State lives in the API (Record, whose format is migrate/record's, annotation names.MigrationStateAnnotation
// on the LVMCluster, copied onto the sets before the LVMCluster is removed), so Apply run again from any
// machine resumes where it stopped.
// The hand-over itself is names.HandedOverNodesAnnotation on the sets, which the operator already honours:
// the operator writes a set's LVMNode only for a handed-over node, so a node is listed first and then
// checked; if the check fails, apply stops there and Rollback hands every node back.
package handover
