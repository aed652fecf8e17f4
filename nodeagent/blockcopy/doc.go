// Package blockcopy copies one block device to another, node agent to node agent, for `lvms move`.
//
// A Sender reads the source device in fixed chunks and a Receiver writes them to the target device, over
// a connection the caller provides: in production a TLS 1.3 connection with mutual authentication
// (ServerConfig, ClientConfig), where each side's certificate chains to the operator's transfer CA and
// names its node, and each side names the node it expects at the other end.
//
// The protocol (frame.go, version 2) is a sequence of frames, each a type byte, a big-endian uint32
// payload length and the payload:
//
//	sender   -> Hello{version, transfer ID, size, chunk size}
//	receiver -> Resume{next chunk}          the receiver's high-water mark: chunks below it are on disk, synced
//	sender   -> Chunk{index, CRC-32C, data} for every chunk from next to the end, in order,
//	         or Zero{index}                 in its place for a chunk that is all zeros in the source
//	sender   -> Done{SHA-256 of the whole source}
//	receiver -> Verifying{bytes read back}  every quarter of the idle timeout while it reads the target back
//	receiver -> Result{ok, SHA-256 of the whole target as read back, message}
//
// A receiver refuses a Hello of another version (or transfer, or a larger source) with a Result that
// says why, before writing anything; so does one whose SpaceCheck fails (the target's thin pool past its
// threshold), and one that another sender's copy is writing already (one copy at a time writes a
// target; ErrBusy).
//
// A Zero chunk is not sent as data. A thick target gets it written as zeros. A thin target (a Receiver
// with Discard) is not written where it reads zero already, which is all of a new thin volume, so it
// allocates only the source's data; where it holds something else the range is discarded and read back,
// and written with zeros only when the discard did not zero it. While a copy writes, SpaceCheck is asked
// every SpaceCheckEvery bytes written and stops the copy when it fails.
//
// Every chunk carries a CRC-32C that the receiver checks before writing it. The receiver records its
// high-water mark (Progress) only after the data below it has been synced to the target (discards
// included), so a copy that is killed restarts at the last synced chunk. The end is verified whole: the
// sender hashes the entire source (including the chunks it skipped on resume and the zero chunks), the
// receiver reads the entire target back and hashes it, and the copy succeeds only when both SHA-256
// digests are equal. A mismatch resets the receiver's progress, so the next attempt copies everything
// again. Reading a large target back outlasts the idle timeout, so the receiver sends Verifying frames
// meanwhile; and an attempt of a transfer whose whole target was verified already, and that writes
// nothing, gets the same verdict without the target being read again (the sender gave up waiting for it).
//
// Memory is bounded by one chunk buffer on the sender and two on the receiver (the second for zero
// ranges; chunk size at most MaxChunkSize); every frame read and write has a deadline (IdleTimeout) taken
// from an injected clock, and cancelling the context ends a copy at once.
package blockcopy
