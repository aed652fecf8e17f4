// Package claims decides which API manages each node. LVMNodeSets (v2) and the LVMCluster (v1) of a
// namespace claim nodes; the rules are:
//
//   - Several sets may share a node when they do not overlap there: no common volume group, device, or
//     device class name, at most one default device class, the same lvmd socket.
//   - A node is managed by either API, never both: a node claimed by the LVMCluster and by a set is a
//     conflict, unless the set names the LVMCluster as its migration source (names.MigratedFromAnnotation):
//     then the LVMCluster keeps the node until the set lists it as handed over
//     (names.HandedOverNodesAnnotation).
//   - In a conflict nothing is overwritten: whoever already manages the node (the incumbent) keeps it; when
//     nobody does yet, the older object keeps it (then the LVMCluster, then the set with the smaller name).
//     Everyone involved is told, with the node and what overlaps.
//
// Compute is pure: both controllers call it with the same picture of the namespace and reach the same
// answer, whatever order they run in.
package claims
