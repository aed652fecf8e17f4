// Package vginit runs the one-time creation of a shared volume group behind a Lease, so that of all the
// nodes that see the LUN exactly one runs `vgcreate --shared` while the others wait.
//
// The Lease lvms-vginit-<vg> in the agent's namespace is held by the node creating the volume group and
// renewed while it works; once the volume group exists the Lease records which node created it and when,
// and every later caller returns at once. A holder that dies mid-way stops renewing: after the Lease's
// duration the next node takes it, checks again whether the volume group exists (the dead holder may have
// finished) and creates it only if not.
package vginit
