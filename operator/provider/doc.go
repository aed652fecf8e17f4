// Package provider maintains the cluster side of the CSI driver that every LVMNodeSet and LVMCluster of the
// namespace shares: the CSIDriver objects, the node agent DaemonSet (placed on the union of all node
// selectors, with the union of all tolerations), its ServiceAccount and RBAC, and on OpenShift its
// SecurityContextConstraints. Everything is written with server-side apply and pruned when the last set and
// LVMCluster are gone — after their own teardown, which needs the agents.
package provider
