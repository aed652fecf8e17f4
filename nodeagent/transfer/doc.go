// Package transfer is the node agent's side of a volume move (operator/move): it turns the copy
// instructions the operator puts on this node's LogicalVolumes into blockcopy senders and receivers over
// mutual TLS, and reports the outcome back as annotations on the same LogicalVolumes.
//
// The target node's agent receives: it listens on its pod address, publishes the address on the target
// LogicalVolume (move.lvm.topolvm.io/receiver), accepts only the source node's certificate, and on success
// reports the verified SHA-256. The source node's agent sends: it reads the receiver's address from the
// target LogicalVolume, accepts only the target node's certificate, and reports its SHA-256. A failed
// attempt is reported (move.lvm.topolvm.io/copy-error) and retried from the receiver's high-water mark.
//
// It is not wired into the node agent yet: the reconciler that watches the node's LogicalVolumes and
// calls Runner.Receive and Runner.Send is still to come.
package transfer
