// Package blockcopy copies one block device to another, node agent to node agent, for `lvms move`.
//
// A Sender reads the source device in fixed chunks and a Receiver writes them to the target device, over
// a connection the caller provides: in production a TLS 1.3 connection with mutual authentication
// (ServerConfig, ClientConfig), where each side's certificate chains to the operator's transfer CA and
// names its node, and each side names the node it expects at the other end.
//
// The protocol (frame.go) is a sequence of frames, each a type byte, a big-endian uint32 payload length
// and the payload:
//
//	sender   -> Hello{version, transfer ID, size, chunk size}
//	receiver -> Resume{next chunk}          the receiver's high-water mark: chunks below it are on disk, synced
//	sender   -> Chunk{index, CRC-32C, data} for every chunk from next to the end, in order
//	sender   -> Done{SHA-256 of the whole source}
//	receiver -> Result{ok, SHA-256 of the whole target as read back, message}
//
// Every chunk carries a CRC-32C that the receiver checks before writing it. The receiver records its
// high-water mark (Progress) only after the data below it has been synced to the target, so a copy that is
// killed restarts at the last synced chunk. The end is verified whole: the sender hashes the entire source
// (including the chunks it skipped on resume), the receiver reads the entire target back and hashes it,
// and the copy succeeds only when both SHA-256 digests are equal. A mismatch resets the receiver's
// progress, so the next attempt copies everything again.
//
// Memory is bounded by one chunk buffer per side (chunk size at most MaxChunkSize); every frame read and
// write has a deadline (IdleTimeout) taken from an injected clock, and cancelling the context ends a copy
// at once.
package blockcopy
