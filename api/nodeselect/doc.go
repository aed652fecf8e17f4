// Package nodeselect decides which nodes an LVMNodeSet or an LVMCluster device class manages — node selector
// terms plus the taints its tolerations allow — and builds the node selectors the operator writes: the union
// that places the node agent, and a selector that leaves out named nodes.
package nodeselect
