// Package noderemoval cleans up after a Node object is deleted: no node agent will ever run there again, so
// the node's LVMNode and LVMVolumeGroupNodeStatus are deleted with their finalizers, and the node's
// finalizers on shared objects (an LVMVolumeGroup carries one per node, named <prefix>/<node name>) are
// removed. Nobody has to strip finalizers by hand.
package noderemoval
