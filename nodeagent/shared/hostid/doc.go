// Package hostid claims a node's sanlock host ID (1..2000) through the API, so that no two nodes sharing a
// lockspace ever use the same one.
//
// One coordination.k8s.io Lease per ID, named lvms-host-id-<N> in the agent's namespace, holds the node's
// name as holder. Creating the Lease is the claim, so exactly one node wins an ID however many start at once;
// a node that restarts finds its own Lease and keeps its ID; the holder renews it, and an ID whose holder
// stopped renewing is handed to another node only after sanlock's host-dead time (plus a margin for clock
// skew), when sanlock itself would let another host take its delta lease. IDs are never derived from node
// names or addresses: those collide.
//
// The Leases have no owner: a deleted Node object does not mean its host stopped writing, so its ID is freed
// by time, not by garbage collection.
package hostid
