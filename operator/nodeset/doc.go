// Package nodeset is the v2alpha1 LVMNodeSet controller. For every node a set manages (see package claims)
// it keeps an LVMNode named after the node whose spec holds the set's template — merged by server-side
// apply with the templates of other sets that share the node — generates the set's StorageClasses and
// VolumeSnapshotClasses, and aggregates the LVMNodes' status into the set's status: every node with its
// state and the reason for any node that is not Ready, KEP-1623 conditions, and events for transitions.
//
// Removing a set from a node (the node left the selector, or the set is deleted) goes in steps the node
// agent can follow: the set withdraws its volume groups from the LVMNode's spec, waits until the agent has
// acted on that (removed them, or reported that data remains), and only then drops the LVMNode (or its own
// part of a shared one). Deleting a set first waits, with a message naming them, for every PVC and PV that
// uses its StorageClasses; a node leaving the selector likewise keeps the set's volume groups while PVs of
// those classes live on it (reason NodeRemovalBlocked, naming the claims).
package nodeset
