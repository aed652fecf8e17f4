// Package agent wires the node agent engine into controller-runtime: one controller per node (named after
// it, so several agents can share one manager, as the local sandbox runs three simulated nodes in one
// process) that watches the node's LVMNode, the LVMVolumeGroups and LVMClusters of the namespace, and the
// Node; builds the desired state; runs the volume group engine; writes lvmd.yaml (or validates the host's
// in ExternalConfiguration mode); and publishes LVMNode.status and LVMVolumeGroupNodeStatus. It reconciles
// when an input changes and on a slow resync (default 5 minutes), never in a loop: status writes that
// change nothing are skipped and its own writes do not trigger it.
//
// Entry points: New(client, Options) and (*Agent).SetupWithManager(mgr).
package agent
