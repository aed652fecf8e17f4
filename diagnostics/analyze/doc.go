// Package analyze turns a support bundle into findings: each analyzer is a pure function over the bundle's
// snapshot (the same read model the console shows, with its explanations) and the node agents' views, and
// reports pass, warn or fail with a message, the object involved and a fix. Findings are what `lvms analyze`
// prints, what the console's findings page lists, and what a bundle carries as analysis.json
// ({format, summary, findings[]}, each finding shaped like a troubleshoot.sh analyzer result: checkName,
// severity, title, message, involvedObject, fix).
//
// The checks (Checks lists them): collection failures, nodes not Ready with their cause, required paths
// missing, all devices excluded, each excluded device with its reason codes, volume groups missing, the
// shared path (lock managers not running, a node out of a shared volume group's lockspace, a shared LUN not
// visible on a node, one sanlock host ID on two nodes, sanlock without a watchdog), thin pool data or
// metadata usage, node agents not running or ready on selected nodes, the CSI driver not
// registered, claims pending for capacity, LogicalVolumes stuck, conflicting LVMNodeSets, nodes managed by
// both API versions, invalid lvmd.yaml, clock or version skew between the operator and the agents, and
// `lvms migrate` runs left half-way (read from the migration record, migrate/record, and the migration
// annotations on the LVMClusters and LVMNodeSets).
package analyze
