// Package shared holds the node agent's part of shared volume groups (the Subprovisioner path): volume
// groups on LUNs every selected node sees, locked with lvmlockd and sanlock. Its subpackages each hold one
// piece: hostid claims the node's sanlock host ID through the API; vginit creates a shared volume group
// on one node only, behind a Lease; lockd runs or watches sanlock and lvmlockd.
package shared
