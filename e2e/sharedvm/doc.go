// Package sharedvm proves the shared volume group path (seed 001) against real kernels: VMs of the e2e/vm
// lane share one raw disk as their SAN LUN and reach the test's API server on the host (and nothing else)
// through a restricted user-mode network; each runs the node agent's shared-path packages with real lvm2,
// sanlock and lvmlockd.
package sharedvm
