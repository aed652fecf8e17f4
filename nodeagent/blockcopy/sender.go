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

// ErrChecksumMismatch marks a copy whose target does not hash like its source.
var ErrChecksumMismatch = errors.New("the target's SHA-256 differs from the source's")

// Sender sends a source device to a Receiver.
type Sender struct {
	// Source is the device (or file) to copy, opened read-only.
	Source io.ReaderAt
	// Size is how many bytes of Source to copy (the source volume's size).
	Size int64
	// TransferID names the transfer; the receiver refuses any other (and resumes only the same one).
	TransferID string
	// ChunkSize is the size of a chunk, MinChunkSize..MaxChunkSize, a multiple of 4096 (0: DefaultChunkSize).
	ChunkSize int
	// IdleTimeout bounds every frame read and write (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Clock sets the deadlines (nil: the real clock).
	Clock clock.PassiveClock
}

// Stats says what a copy did.
type Stats struct {
	// Chunks is the number of chunks of the volume, Skipped how many of them the receiver already had.
	Chunks, Skipped uint64
	// BytesSent is the chunk data sent (received) in this run; ZeroChunks the chunks that were all zero
	// in the source and went as Zero frames, without data.
	BytesSent  int64
	ZeroChunks uint64
	// BytesWritten (the receiver's) is what this run wrote to the target: the chunks with data, and zeros
	// where a zero chunk's range was not zero and could not be discarded. BytesDiscarded is what it
	// discarded instead.
	BytesWritten, BytesDiscarded int64
	// SHA256 is the digest both sides agreed on, hex.
	SHA256 string
}

func checkChunkSize(n int) error {
	if n < MinChunkSize || n > MaxChunkSize || n%4096 != 0 {
		return fmt.Errorf("chunk size %d: must be a multiple of 4096 between %d and %d", n, MinChunkSize, MaxChunkSize)
	}
	return nil
}

// Send copies the source over conn, starting where the receiver says it got to, and returns once the
// receiver confirmed that the whole target hashes like the whole source.
func (s *Sender) Send(ctx context.Context, conn net.Conn) (Stats, error) {
	cs := s.ChunkSize
	if cs == 0 {
		cs = DefaultChunkSize
	}
	if err := checkChunkSize(cs); err != nil {
		return Stats{}, err
	}
	if s.Size <= 0 {
		return Stats{}, fmt.Errorf("source size %d: nothing to copy", s.Size)
	}
	if s.TransferID == "" || len(s.TransferID) > maxTransferID {
		return Stats{}, fmt.Errorf("transfer ID %q: must be 1 to %d bytes", s.TransferID, maxTransferID)
	}
	st := newStream(ctx, conn, s.Clock, s.IdleTimeout)
	defer st.close()

	n := chunkCount(s.Size, cs)
	stats := Stats{Chunks: n}
	if err := st.write(encodeHello(nil, hello{Version: ProtocolVersion, TransferID: s.TransferID, Size: uint64(s.Size), ChunkSize: uint32(cs)})); err != nil {
		return stats, err
	}
	if err := st.flush(); err != nil {
		return stats, err
	}
	ctl := make([]byte, 0, maxControlPayload)
	p, err := st.expect(frameResume, ctl)
	if err != nil {
		return stats, s.peerRefused(err, p)
	}
	r, err := decodeResume(p)
	if err != nil {
		return stats, err
	}
	if r.NextChunk > n {
		return stats, protoErr("the receiver asked to resume at chunk %d of %d", r.NextChunk, n)
	}
	stats.Skipped = r.NextChunk

	sum := sha256.New()
	buf := make([]byte, cs)
	hdr := make([]byte, 0, frameHeaderLen+chunkHeaderLen)
	for i := uint64(0); i < n; i++ {
		if err := ctx.Err(); err != nil {
			return stats, context.Cause(ctx)
		}
		data := buf[:chunkLen(s.Size, cs, i)]
		off := int64(i) * int64(cs)
		if got, err := s.Source.ReadAt(data, off); got != len(data) {
			return stats, fmt.Errorf("read the source at byte %d (chunk %d): %d of %d bytes: %w", off, i, got, len(data), errors.Join(err, io.ErrUnexpectedEOF))
		}
		sum.Write(data)
		if i < r.NextChunk {
			continue // the receiver has it; it still counts in the whole-volume digest
		}
		if isZero(data) {
			// A Zero frame instead of the data: the receiver need not write a thin target there.
			if err := st.write(encodeZero(hdr[:0], zero{Index: i})); err != nil {
				return stats, err
			}
			stats.ZeroChunks++
			continue
		}
		c := chunk{Index: i, Sum: crc32.Checksum(data, castagnoli), Data: data}
		if err := st.write(appendChunkHeader(hdr[:0], c), data); err != nil {
			return stats, err
		}
		stats.BytesSent += int64(len(data))
	}
	var dn done
	sum.Sum(dn.SHA256[:0])
	if err := st.write(encodeDone(nil, dn)); err != nil {
		return stats, err
	}
	if err := st.flush(); err != nil {
		return stats, err
	}
	p, err = s.awaitResult(st, ctl, uint64(s.Size))
	if err != nil {
		return stats, err
	}
	res, err := decodeResult(p)
	if err != nil {
		return stats, err
	}
	if !res.OK {
		return stats, fmt.Errorf("the receiver refused the copy: %s", res.Message)
	}
	if res.SHA256 != dn.SHA256 {
		return stats, fmt.Errorf("%w: source %s, target %s", ErrChecksumMismatch, hex.EncodeToString(dn.SHA256[:]), hex.EncodeToString(res.SHA256[:]))
	}
	stats.SHA256 = hex.EncodeToString(dn.SHA256[:])
	return stats, nil
}

// awaitResult reads the receiver's Result, and the Verifying frames it sends before it while it reads the
// target back (each one restarts the idle timeout; what they count may only grow, up to size).
func (s *Sender) awaitResult(st *stream, buf []byte, size uint64) ([]byte, error) {
	var seen uint64
	for {
		t, p, err := st.readFrame(buf, 0)
		if err != nil {
			return p, err
		}
		switch t {
		case frameResult:
			return p, nil
		case frameVerifying:
			v, err := decodeVerifying(p)
			if err != nil {
				return p, err
			}
			if v.Bytes < seen || v.Bytes > size {
				return p, protoErr("the receiver says it verified %d bytes after %d, of %d", v.Bytes, seen, size)
			}
			seen = v.Bytes
		default:
			return p, protoErr("got a %s frame, expected Verifying or Result", t)
		}
	}
}

// peerRefused reads the receiver's reason when it answered the Hello with a Result instead of a Resume.
func (s *Sender) peerRefused(err error, p []byte) error {
	if !errors.Is(err, ErrProtocol) {
		return err
	}
	if res, derr := decodeResult(p); derr == nil && !res.OK {
		return fmt.Errorf("the receiver refused the transfer: %s", res.Message)
	}
	return err
}
