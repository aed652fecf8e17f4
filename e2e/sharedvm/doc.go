// Package sharedvm runs the product's own processes against real kernels, with the test's API server on
// the host and VMs of the e2e/vm lane that reach it (and nothing else) through a restricted user-mode
// network: the shared volume group path (seed 001), where the VMs share one raw disk as their SAN LUN and
// run the node agent with real lvm2, sanlock and lvmlockd; and MicroShift's take-over from TopoLVM (seeds
// 002, 003), an edge VM in TopoLVM's state with `lvms nodeagent` over it and `lvms operator` on the host.
// TestVMMovePVC moves a claim's volume between two VMs' local disks as a user does (`lvms move pvc`), with
// `lvms nodeagent` in each VM, as the node agent's ServiceAccount, and `lvms operator` on the host.
package sharedvm
