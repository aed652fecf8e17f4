package blockcopy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Target is the device a Receiver writes: readable (for the final verification) and syncable.
type Target interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
}

// Progress is a receiver's persisted high-water mark for one transfer.
type Progress struct {
	// TransferID, Size and ChunkSize say which transfer NextChunk belongs to; a Hello that differs in
	// any of them starts from chunk 0.
	TransferID string `json:"transferID"`
	Size       int64  `json:"size"`
	ChunkSize  int    `json:"chunkSize"`
	// NextChunk is the first chunk the target does not have; everything below was synced before it was
	// recorded.
	NextChunk uint64 `json:"nextChunk"`
	// SHA256 is set once the whole target was verified (hex).
	SHA256 string `json:"sha256,omitempty"`
}

// ProgressStore keeps a receiver's Progress across restarts.
type ProgressStore interface {
	Load() (Progress, error)
	Save(Progress) error
}

// Receiver receives a source device into a target device.
type Receiver struct {
	// Target is the device to write, at least as large as the source.
	Target Target
	// TargetSize is the target's size in bytes.
	TargetSize int64
	// TransferID is the transfer this receiver accepts; a Hello for any other is refused.
	TransferID string
	// Progress keeps the high-water mark (nil: a copy always starts at chunk 0).
	Progress ProgressStore
	// SyncEvery is how many bytes are written between syncs that advance the high-water mark (0: 64 MiB).
	SyncEvery int64
	// IdleTimeout bounds every frame read and write (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Clock sets the deadlines (nil: the real clock).
	Clock clock.PassiveClock
	// OnProgress, when set, is called with the high-water mark and the number of chunks each time the
	// mark is recorded (for status; it must not block).
	OnProgress func(next, total uint64)
	// Discard, set for a thin target, unmaps a range of it (DiscardFile): a range the source has zero is
	// then not written (see Receive). nil: zero ranges are written with zeros, as on a thick target.
	Discard func(off, length int64) error
	// SpaceCheck, when set, is asked when a copy starts and again each time SpaceCheckEvery more bytes
	// were written to the target (0: DefaultSpaceCheckEvery); an error stops the copy with that error
	// (the target's thin pool filling up). It must return within the IdleTimeout.
	SpaceCheck      func(context.Context) error
	SpaceCheckEvery int64

	busy sync.Mutex // held by the Receive that writes the target
}

// DefaultSpaceCheckEvery is how many bytes a receiver writes between two SpaceChecks when none is given.
const DefaultSpaceCheckEvery = 128 << 20

// ErrBusy marks a sender refused because another copy is writing the same target.
var ErrBusy = errors.New("another copy into this target is in progress")

// Receive serves one transfer on conn: it answers the Hello with its high-water mark, writes every
// chunk after checking its CRC-32C, and at the end reads the whole target back and compares its SHA-256
// with the source's. It returns the stats and, on success, the agreed digest.
//
// A Zero chunk is written as zeros, unless the target is thin (Discard set): then a range that reads
// zero already is left alone (an unwritten thin range reads zeros and stays unallocated), any other is
// discarded and read back, and written with zeros only when it still is not zero. The final read-back
// covers these ranges like every other.
//
// Receive may be called for several connections at once; one at a time writes the target, any other
// answers its sender's Hello with a refusal and returns ErrBusy.
func (r *Receiver) Receive(ctx context.Context, conn net.Conn) (Stats, error) {
	st := newStream(ctx, conn, r.Clock, r.IdleTimeout)
	defer st.close()
	ctl := make([]byte, 0, maxControlPayload)
	p, err := st.expect(frameHello, ctl)
	if err != nil {
		return Stats{}, err
	}
	h, err := decodeHello(p)
	if err != nil {
		return Stats{}, err
	}
	if !r.busy.TryLock() {
		return Stats{}, r.refuse(st, fmt.Errorf("%w; this attempt is refused and the sender tries again (a copy whose sender stopped answering ends after %s)", ErrBusy, st.timeout))
	}
	defer r.busy.Unlock()
	if err := r.checkHello(h); err != nil {
		return Stats{}, r.refuse(st, err)
	}
	size, cs := int64(h.Size), int(h.ChunkSize)
	n := chunkCount(size, cs)
	stats := Stats{Chunks: n}

	prog := Progress{TransferID: h.TransferID, Size: size, ChunkSize: cs}
	if r.Progress != nil {
		old, err := r.Progress.Load()
		if err != nil {
			return stats, fmt.Errorf("read the copy's progress: %w", err)
		}
		if old.TransferID == prog.TransferID && old.Size == size && old.ChunkSize == cs && old.NextChunk <= n {
			prog.NextChunk = old.NextChunk
			if old.NextChunk == n {
				prog.SHA256 = old.SHA256 // the whole target was verified; finish may reuse the verdict
			}
		}
	}
	stats.Skipped = prog.NextChunk
	if r.SpaceCheck != nil {
		// A target that has no room is refused before anything is written, and the sender says why.
		if err := r.SpaceCheck(ctx); err != nil {
			return stats, r.refuse(st, err)
		}
	}
	if err := st.write(encodeResume(nil, resume{NextChunk: prog.NextChunk})); err != nil {
		return stats, err
	}
	if err := st.flush(); err != nil {
		return stats, err
	}

	syncEvery := r.SyncEvery
	if syncEvery <= 0 {
		syncEvery = 64 << 20
	}
	w := &writer{r: r, ctx: ctx, stats: &stats, every: r.SpaceCheckEvery}
	if w.every <= 0 {
		w.every = DefaultSpaceCheckEvery
	}
	buf := make([]byte, 0, chunkHeaderLen+cs)
	next := prog.NextChunk
	var unsynced int64
	for {
		t, p, err := st.readFrame(buf, cs)
		if err != nil {
			return stats, err
		}
		var index uint64
		var c chunk
		switch t {
		case frameDone:
			dn, err := decodeDone(p)
			if err != nil {
				return stats, err
			}
			if next != n {
				return stats, protoErr("the sender finished after chunk %d of %d", next, n)
			}
			return r.finish(ctx, st, &prog, dn, stats)
		case frameChunk:
			if c, err = decodeChunk(p); err != nil {
				return stats, err
			}
			index = c.Index
		case frameZero:
			z, err := decodeZero(p)
			if err != nil {
				return stats, err
			}
			index = z.Index
		default:
			return stats, protoErr("got a %s frame, expected Chunk, Zero or Done", t)
		}
		if index != next || next >= n {
			return stats, protoErr("got chunk %d, expected chunk %d of %d", index, next, n)
		}
		want := chunkLen(size, cs, next)
		off := int64(next) * int64(cs)
		if t == frameZero {
			if w.scratch == nil {
				w.scratch = make([]byte, cs)
			}
			err = w.zero(next, off, w.scratch[:want])
			stats.ZeroChunks++
		} else {
			if len(c.Data) != want {
				return stats, protoErr("chunk %d has %d bytes, expected %d", c.Index, len(c.Data), want)
			}
			if got := crc32.Checksum(c.Data, castagnoli); got != c.Sum {
				return stats, fmt.Errorf("chunk %d (bytes %d-%d) arrived corrupted: CRC-32C %08x, the sender's %08x; nothing of it was written, rerun the copy to resume at chunk %d",
					c.Index, off, off+int64(len(c.Data))-1, got, c.Sum, prog.NextChunk)
			}
			stats.BytesSent += int64(len(c.Data))
			err = w.write(c.Data, off, "chunk", c.Index)
		}
		if errors.Is(err, errNoSpace) {
			// What is on the target stays: record it, so the copy resumes here once there is room.
			return stats, errors.Join(err, r.advance(&prog, next))
		}
		if err != nil {
			return stats, err
		}
		next++
		unsynced += int64(want)
		if unsynced >= syncEvery {
			if err := r.advance(&prog, next); err != nil {
				return stats, err
			}
			unsynced = 0
		}
	}
}

// refuse answers the Hello with a Result that says why and returns err.
func (r *Receiver) refuse(st *stream, err error) error {
	_ = st.write(encodeResult(nil, result{Message: err.Error()}))
	_ = st.flush()
	return err
}

// errNoSpace marks a SpaceCheck's error.
var errNoSpace = errors.New("no room on the target")

// writer writes to a receiver's target, asking SpaceCheck each time every more bytes were written.
type writer struct {
	r       *Receiver
	ctx     context.Context
	stats   *Stats
	every   int64
	since   int64 // bytes written since the last SpaceCheck
	scratch []byte
}

// write writes b at off: what (index) for messages.
func (w *writer) write(b []byte, off int64, what string, index uint64) error {
	if w.r.SpaceCheck != nil && w.since >= w.every {
		if err := w.r.SpaceCheck(w.ctx); err != nil {
			return fmt.Errorf("%w: the copy stopped before %s %d: %w", errNoSpace, what, index, err)
		}
		w.since = 0
	}
	if _, err := w.r.Target.WriteAt(b, off); err != nil {
		return fmt.Errorf("write %s %d to the target: %w", what, index, err)
	}
	w.since += int64(len(b))
	w.stats.BytesWritten += int64(len(b))
	return nil
}

// zero makes chunk index, len(buf) bytes at off, zero on the target (see Receive); buf is scratch space.
func (w *writer) zero(index uint64, off int64, buf []byte) error {
	if w.r.Discard != nil {
		if err := readAt(w.r.Target, buf, off); err != nil {
			return err
		}
		if isZero(buf) {
			return nil
		}
		// A discard that fails or leaves data (a pool that ignores discards, a range smaller than the
		// pool's chunk) is no error: zeros are written instead.
		if err := w.r.Discard(off, int64(len(buf))); err == nil {
			if err := readAt(w.r.Target, buf, off); err != nil {
				return err
			}
			if isZero(buf) {
				w.stats.BytesDiscarded += int64(len(buf))
				return nil
			}
		}
	}
	clear(buf)
	return w.write(buf, off, "the zeros of chunk", index)
}

// readAt reads len(b) bytes of the target at off.
func readAt(dev io.ReaderAt, b []byte, off int64) error {
	if n, err := dev.ReadAt(b, off); n != len(b) {
		return fmt.Errorf("read the target at byte %d: %d of %d bytes: %w", off, n, len(b), errors.Join(err, io.ErrUnexpectedEOF))
	}
	return nil
}

func (r *Receiver) checkHello(h hello) error {
	if h.Version != ProtocolVersion {
		return fmt.Errorf("protocol version %d, this agent speaks %d: run the same LVMS version on both nodes", h.Version, ProtocolVersion)
	}
	if h.TransferID != r.TransferID {
		return fmt.Errorf("transfer %q is not the one this receiver waits for (%q)", h.TransferID, r.TransferID)
	}
	if err := checkChunkSize(int(h.ChunkSize)); err != nil {
		return err
	}
	if h.Size == 0 || h.Size > uint64(r.TargetSize) {
		return fmt.Errorf("the source has %d bytes and the target %d: the target must be at least as large", h.Size, r.TargetSize)
	}
	return nil
}

// advance syncs the target and records that every chunk below next is on it.
func (r *Receiver) advance(prog *Progress, next uint64) error {
	if err := r.Target.Sync(); err != nil {
		return fmt.Errorf("sync the target: %w", err)
	}
	prog.NextChunk = next
	if r.Progress != nil {
		if err := r.Progress.Save(*prog); err != nil {
			return fmt.Errorf("record the copy's progress: %w", err)
		}
	}
	if r.OnProgress != nil {
		r.OnProgress(next, chunkCount(prog.Size, prog.ChunkSize))
	}
	return nil
}

// finish syncs, reads the whole target back, compares digests and answers with a Result.
func (r *Receiver) finish(ctx context.Context, st *stream, prog *Progress, dn done, stats Stats) (Stats, error) {
	verified := prog.SHA256 // from an earlier attempt of this transfer that verified the whole target
	if err := r.advance(prog, stats.Chunks); err != nil {
		return stats, err
	}
	var got [32]byte
	if sum, err := hex.DecodeString(verified); err == nil && len(sum) == 32 && [32]byte(sum) == dn.SHA256 && stats.BytesSent == 0 && stats.BytesWritten == 0 && stats.BytesDiscarded == 0 {
		// Nothing was written since the target was verified to hash like this source (the sender timed out
		// waiting for that verdict, or its report failed): the same verdict, without reading it all again.
		got = dn.SHA256
	} else {
		// Reading a large target back outlasts the idle timeout: the sender is told how far it got.
		last := st.clock.Now()
		keepAlive := func(done int64) error {
			if now := st.clock.Now(); now.Sub(last) >= st.timeout/4 {
				last = now
				if err := st.write(encodeVerifying(nil, verifying{Bytes: uint64(done)})); err != nil {
					return err
				}
				return st.flush()
			}
			return nil
		}
		var err error
		if got, err = hashDevice(ctx, r.Target, prog.Size, prog.ChunkSize, keepAlive); err != nil {
			return stats, err
		}
	}
	res := result{OK: true, SHA256: got}
	var verr error
	if got != dn.SHA256 {
		res = result{SHA256: got, Message: fmt.Sprintf("the target's SHA-256 %x differs from the source's %x", got, dn.SHA256)}
		verr = fmt.Errorf("%w: source %x, target %x; the next attempt copies everything again", ErrChecksumMismatch, dn.SHA256, got)
		// The target's prefix cannot be trusted: start over next time.
		prog.NextChunk = 0
	} else {
		prog.SHA256 = hex.EncodeToString(got[:])
		stats.SHA256 = prog.SHA256
	}
	if r.Progress != nil {
		if err := r.Progress.Save(*prog); err != nil {
			return stats, errors.Join(verr, fmt.Errorf("record the copy's progress: %w", err))
		}
	}
	if err := st.write(encodeResult(nil, res)); err != nil {
		return stats, errors.Join(verr, err)
	}
	if err := st.flush(); err != nil {
		return stats, errors.Join(verr, err)
	}
	return stats, verr
}

// hashDevice returns the SHA-256 of the first size bytes of dev, read in chunks of chunkSize; read, when set, is
// told how many bytes were read after each chunk, and its error ends the hashing.
func hashDevice(ctx context.Context, dev io.ReaderAt, size int64, chunkSize int, read func(done int64) error) ([32]byte, error) {
	sum := sha256.New()
	buf := make([]byte, chunkSize)
	for off := int64(0); off < size; off += int64(chunkSize) {
		if err := ctx.Err(); err != nil {
			return [32]byte{}, context.Cause(ctx)
		}
		b := buf[:min(int64(chunkSize), size-off)]
		if n, err := dev.ReadAt(b, off); n != len(b) {
			return [32]byte{}, fmt.Errorf("read the target back at byte %d: %d of %d bytes: %w", off, n, len(b), errors.Join(err, io.ErrUnexpectedEOF))
		}
		sum.Write(b)
		if read != nil {
			if err := read(off + int64(len(b))); err != nil {
				return [32]byte{}, err
			}
		}
	}
	var out [32]byte
	sum.Sum(out[:0])
	return out, nil
}

// HashDevice returns the hex SHA-256 of the first size bytes of dev: the digest a copy compares.
func HashDevice(ctx context.Context, dev io.ReaderAt, size int64) (string, error) {
	d, err := hashDevice(ctx, dev, size, DefaultChunkSize, nil)
	return hex.EncodeToString(d[:]), err
}
