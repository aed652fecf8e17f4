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
// Controller (lvms nodeagent, cmd/lvms/transfer.go) watches this node's LogicalVolumes and runs one
// goroutine per "<logical volume>/<move ID>": a receiver for receive-from and move.lvm.topolvm.io/id, a
// sender for send-to, once the target carries the receiver's address. A failed attempt is retried with
// backoff until the operator removes the instructions, which cancels the goroutine. The node's transfer
// certificate is asked from the operator's signer (nodeagent/transfercert) on the first move and again
// when a third of its lifetime is left. An agent annotates, opens and listens for its own node's
// LogicalVolumes only; a malformed instruction is reported as a copy error.
package transfer
