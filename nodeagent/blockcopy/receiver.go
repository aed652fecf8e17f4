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
}

// Receive serves one transfer on conn: it answers the Hello with its high-water mark, writes every
// chunk after checking its CRC-32C, and at the end reads the whole target back and compares its SHA-256
// with the source's. It returns the stats and, on success, the agreed digest.
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
	if err := r.checkHello(h); err != nil {
		_ = st.write(encodeResult(nil, result{Message: err.Error()}))
		_ = st.flush()
		return Stats{}, err
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
		}
	}
	stats.Skipped = prog.NextChunk
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
	buf := make([]byte, 0, chunkHeaderLen+cs)
	next := prog.NextChunk
	var unsynced int64
	for {
		t, p, err := st.readFrame(buf, cs)
		if err != nil {
			return stats, err
		}
		if t == frameDone {
			dn, err := decodeDone(p)
			if err != nil {
				return stats, err
			}
			if next != n {
				return stats, protoErr("the sender finished after chunk %d of %d", next, n)
			}
			return r.finish(ctx, st, &prog, dn, stats)
		}
		if t != frameChunk {
			return stats, protoErr("got a %s frame, expected Chunk or Done", t)
		}
		c, err := decodeChunk(p)
		if err != nil {
			return stats, err
		}
		if c.Index != next || next >= n {
			return stats, protoErr("got chunk %d, expected chunk %d of %d", c.Index, next, n)
		}
		if want := chunkLen(size, cs, next); len(c.Data) != want {
			return stats, protoErr("chunk %d has %d bytes, expected %d", c.Index, len(c.Data), want)
		}
		if got := crc32.Checksum(c.Data, castagnoli); got != c.Sum {
			return stats, fmt.Errorf("chunk %d (bytes %d-%d) arrived corrupted: CRC-32C %08x, the sender's %08x; nothing of it was written, rerun the copy to resume at chunk %d",
				c.Index, int64(c.Index)*int64(cs), int64(c.Index)*int64(cs)+int64(len(c.Data))-1, got, c.Sum, prog.NextChunk)
		}
		if _, err := r.Target.WriteAt(c.Data, int64(c.Index)*int64(cs)); err != nil {
			return stats, fmt.Errorf("write chunk %d to the target: %w", c.Index, err)
		}
		next++
		stats.BytesSent += int64(len(c.Data))
		unsynced += int64(len(c.Data))
		if unsynced >= syncEvery {
			if err := r.advance(&prog, next); err != nil {
				return stats, err
			}
			unsynced = 0
		}
	}
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
	if err := r.advance(prog, stats.Chunks); err != nil {
		return stats, err
	}
	got, err := hashDevice(ctx, r.Target, prog.Size, prog.ChunkSize)
	if err != nil {
		return stats, err
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

// hashDevice returns the SHA-256 of the first size bytes of dev, read in chunks of chunkSize.
func hashDevice(ctx context.Context, dev io.ReaderAt, size int64, chunkSize int) ([32]byte, error) {
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
	}
	var out [32]byte
	sum.Sum(out[:0])
	return out, nil
}

// HashDevice returns the hex SHA-256 of the first size bytes of dev: the digest a copy compares.
func HashDevice(ctx context.Context, dev io.ReaderAt, size int64) (string, error) {
	d, err := hashDevice(ctx, dev, size, DefaultChunkSize)
	return hex.EncodeToString(d[:]), err
}
