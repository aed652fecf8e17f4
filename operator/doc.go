// Package operator wires the LVMS operator: the scheme, the cache (namespace-scoped for LVMS's own objects,
// cluster-wide for Nodes, classes and volumes, managed fields kept only where server-side apply ownership is
// read), field indexes, and every controller — LVMNodeSet (v2), LVMCluster (v1), the node agent's
// cluster resources (provider) and node removal. `lvms operator` and the local sandbox both start it through
// Setup.
package operator
