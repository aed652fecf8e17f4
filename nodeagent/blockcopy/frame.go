package blockcopy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// ProtocolVersion is the version a Hello carries; a receiver refuses any other. Version 2 added the Zero
// frame.
const ProtocolVersion = 2

const (
	// MinChunkSize and MaxChunkSize bound the chunk size a sender may ask for (and so the memory a
	// receiver spends on one frame).
	MinChunkSize = 4096
	MaxChunkSize = 16 << 20
	// DefaultChunkSize is the chunk size when none is given.
	DefaultChunkSize = 1 << 20

	frameHeaderLen = 5
	// maxControlPayload bounds every frame but a chunk.
	maxControlPayload = 4096
	// maxTransferID bounds a transfer ID (a Kubernetes name and a UID fit).
	maxTransferID = 512
	// maxMessage bounds the message of a Result.
	maxMessage     = 2048
	chunkHeaderLen = 12 // index uint64 + CRC-32C uint32
)

// frameType is the first byte of a frame.
type frameType uint8

const (
	frameHello  frameType = 1
	frameResume frameType = 2
	frameChunk  frameType = 3
	frameDone   frameType = 4
	frameResult frameType = 5
	frameZero   frameType = 6
	// frameVerifying keeps the sender waiting while the receiver reads the whole target back: a large volume
	// on a slow disk takes far longer than one idle timeout.
	frameVerifying frameType = 7
)

func (t frameType) String() string {
	switch t {
	case frameHello:
		return "Hello"
	case frameResume:
		return "Resume"
	case frameChunk:
		return "Chunk"
	case frameDone:
		return "Done"
	case frameResult:
		return "Result"
	case frameZero:
		return "Zero"
	case frameVerifying:
		return "Verifying"
	}
	return fmt.Sprintf("frame type %d", uint8(t))
}

// ErrProtocol marks a frame that breaks the protocol (unknown type, bad length, bad field).
var ErrProtocol = errors.New("blockcopy protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// hello opens a transfer.
type hello struct {
	Version    uint16
	TransferID string
	Size       uint64
	ChunkSize  uint32
}

// resume is the receiver's high-water mark: the first chunk it needs.
type resume struct {
	NextChunk uint64
}

// chunk is one chunk of the source with its CRC-32C.
type chunk struct {
	Index uint64
	Sum   uint32
	Data  []byte
}

// zero stands for a chunk that is all zeros in the source: no data, no CRC.
type zero struct {
	Index uint64
}

// verifying says how many bytes of the target the receiver has read back so far.
type verifying struct {
	Bytes uint64
}

// done carries the SHA-256 of the whole source.
type done struct {
	SHA256 [32]byte
}

// result is the receiver's verdict.
type result struct {
	OK      bool
	SHA256  [32]byte
	Message string
}

// maxPayload is the largest payload a frame of type t may carry, for a transfer with chunkSize.
func maxPayload(t frameType, chunkSize int) (int, error) {
	switch t {
	case frameHello, frameResume, frameDone, frameResult:
		return maxControlPayload, nil
	case frameZero, frameVerifying:
		return 8, nil
	case frameChunk:
		return chunkHeaderLen + chunkSize, nil
	}
	return 0, protoErr("unknown frame type %d", uint8(t))
}

// readFrame reads one frame into buf (grown up to the frame's limit) and returns its type and payload,
// which aliases buf. chunkSize bounds a Chunk frame; before the Hello is known it is 0, and a Chunk is
// refused.
func readFrame(r io.Reader, buf []byte, chunkSize int) (frameType, []byte, error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, buf, err
	}
	t := frameType(hdr[0])
	n := binary.BigEndian.Uint32(hdr[1:])
	limit, err := maxPayload(t, chunkSize)
	if err != nil {
		return 0, buf, err
	}
	if t == frameChunk && chunkSize == 0 {
		return 0, buf, protoErr("a Chunk frame before the Hello")
	}
	if uint64(n) > uint64(limit) {
		return 0, buf, protoErr("%s frame of %d bytes, at most %d allowed", t, n, limit)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, buf, fmt.Errorf("read %s frame: %w", t, err)
	}
	return t, buf, nil
}

// appendFrame appends a frame header for type t and a payload of n bytes.
func appendHeader(b []byte, t frameType, n int) []byte {
	b = append(b, byte(t))
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// decoder reads fields from a payload and remembers the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.err = protoErr("payload ends early")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if v := d.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) str(limit int) string {
	n := int(d.u16())
	if d.err == nil && n > limit {
		d.err = protoErr("text of %d bytes, at most %d allowed", n, limit)
		return ""
	}
	v := d.take(n)
	if d.err == nil && !utf8.Valid(v) {
		d.err = protoErr("text is not UTF-8")
		return ""
	}
	return string(v)
}

func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = protoErr("%d bytes after the last field", len(d.b))
	}
	return d.err
}

func encodeHello(b []byte, h hello) []byte {
	p := binary.BigEndian.AppendUint16(nil, h.Version)
	p = appendString(p, h.TransferID)
	p = binary.BigEndian.AppendUint64(p, h.Size)
	p = binary.BigEndian.AppendUint32(p, h.ChunkSize)
	return append(appendHeader(b, frameHello, len(p)), p...)
}

func decodeHello(p []byte) (hello, error) {
	d := decoder{b: p}
	h := hello{Version: d.u16(), TransferID: d.str(maxTransferID), Size: d.u64(), ChunkSize: d.u32()}
	return h, d.end()
}

func encodeResume(b []byte, r resume) []byte {
	b = appendHeader(b, frameResume, 8)
	return binary.BigEndian.AppendUint64(b, r.NextChunk)
}

func decodeResume(p []byte) (resume, error) {
	d := decoder{b: p}
	r := resume{NextChunk: d.u64()}
	return r, d.end()
}

// appendChunkHeader appends the frame header and the chunk's index and sum; the data follows.
func appendChunkHeader(b []byte, c chunk) []byte {
	b = appendHeader(b, frameChunk, chunkHeaderLen+len(c.Data))
	b = binary.BigEndian.AppendUint64(b, c.Index)
	return binary.BigEndian.AppendUint32(b, c.Sum)
}

// decodeChunk returns a chunk whose Data aliases p.
func decodeChunk(p []byte) (chunk, error) {
	d := decoder{b: p}
	c := chunk{Index: d.u64(), Sum: d.u32()}
	if d.err != nil {
		return chunk{}, d.err
	}
	c.Data = d.b
	return c, nil
}

func encodeZero(b []byte, z zero) []byte {
	b = appendHeader(b, frameZero, 8)
	return binary.BigEndian.AppendUint64(b, z.Index)
}

func decodeZero(p []byte) (zero, error) {
	d := decoder{b: p}
	z := zero{Index: d.u64()}
	return z, d.end()
}

func encodeVerifying(b []byte, v verifying) []byte {
	b = appendHeader(b, frameVerifying, 8)
	return binary.BigEndian.AppendUint64(b, v.Bytes)
}

func decodeVerifying(p []byte) (verifying, error) {
	d := decoder{b: p}
	v := verifying{Bytes: d.u64()}
	return v, d.end()
}

func encodeDone(b []byte, dn done) []byte {
	b = appendHeader(b, frameDone, 32)
	return append(b, dn.SHA256[:]...)
}

func decodeDone(p []byte) (done, error) {
	d := decoder{b: p}
	var dn done
	copy(dn.SHA256[:], d.take(32))
	return dn, d.end()
}

func encodeResult(b []byte, r result) []byte {
	var ok byte
	if r.OK {
		ok = 1
	}
	p := append([]byte{ok}, r.SHA256[:]...)
	p = appendString(p, truncate(r.Message, maxMessage))
	return append(appendHeader(b, frameResult, len(p)), p...)
}

func decodeResult(p []byte) (result, error) {
	d := decoder{b: p}
	var r result
	switch d.u8() {
	case 0:
	case 1:
		r.OK = true
	default:
		if d.err == nil {
			d.err = protoErr("result flag is neither 0 nor 1")
		}
	}
	copy(r.SHA256[:], d.take(32))
	r.Message = d.str(maxMessage)
	return r, d.end()
}

// truncate shortens s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
