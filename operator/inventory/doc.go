// Package inventory reads, from the operator's cache, the picture of one namespace every controller decides
// from: Nodes, LVMNodeSets with the nodes each selects, LVMClusters with the nodes each device class
// selects, LVMNodes and LVMVolumeGroupNodeStatuses. It turns that picture into the input of claims.Compute.
package inventory
