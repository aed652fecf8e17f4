// Package provider maintains the cluster side of the CSI driver that every LVMNodeSet and LVMCluster of the
// namespace shares: the CSIDriver objects and the node agent DaemonSet (placed on the union of all node
// selectors, with the union of all tolerations). The agent's ServiceAccount, RBAC, admission policy and
// SecurityContextConstraints are static (deploy/nodeagent): the operator grants no permission. Everything
// is written with server-side apply and pruned when the last set and LVMCluster are gone — after their own
// teardown, which needs the agents.
package provider
