package blockcopy

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"
)

func TestFrames_RoundTrip(t *testing.T) {
	data := bytes.Repeat([]byte{7}, 100)
	var b []byte
	b = encodeHello(b, hello{Version: 1, TransferID: "ns/pvc/uid", Size: 1 << 30, ChunkSize: 1 << 20})
	b = encodeResume(b, resume{NextChunk: 42})
	b = append(appendChunkHeader(b, chunk{Index: 9, Sum: crc32.Checksum(data, castagnoli), Data: data}), data...)
	b = encodeZero(b, zero{Index: 10})
	b = encodeDone(b, done{SHA256: [32]byte{1, 2, 3}})
	b = encodeResult(b, result{OK: true, SHA256: [32]byte{4}, Message: "fine"})
	r := bytes.NewReader(b)
	var got []string
	for {
		typ, p, err := readFrame(r, nil, 4096)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case frameHello:
			h, err := decodeHello(p)
			if err != nil || h.TransferID != "ns/pvc/uid" || h.Size != 1<<30 || h.ChunkSize != 1<<20 {
				t.Errorf("hello %+v, %v", h, err)
			}
		case frameResume:
			rs, err := decodeResume(p)
			if err != nil || rs.NextChunk != 42 {
				t.Errorf("resume %+v, %v", rs, err)
			}
		case frameChunk:
			c, err := decodeChunk(p)
			if err != nil || c.Index != 9 || !bytes.Equal(c.Data, data) {
				t.Errorf("chunk %d, %v", c.Index, err)
			}
		case frameZero:
			z, err := decodeZero(p)
			if err != nil || z.Index != 10 {
				t.Errorf("zero %+v, %v", z, err)
			}
		case frameDone:
			d, err := decodeDone(p)
			if err != nil || d.SHA256[2] != 3 {
				t.Errorf("done %+v, %v", d, err)
			}
		case frameResult:
			res, err := decodeResult(p)
			if err != nil || !res.OK || res.Message != "fine" {
				t.Errorf("result %+v, %v", res, err)
			}
		}
		got = append(got, typ.String())
	}
	if strings.Join(got, ",") != "Hello,Resume,Chunk,Zero,Done,Result" {
		t.Errorf("frames %v", got)
	}
}

func TestReadFrame_RefusesOversizedAndUnknownFramesWithoutAllocating(t *testing.T) {
	cases := map[string][]byte{
		"a chunk larger than the chunk size":     {byte(frameChunk), 0, 0, 0x10, 0x0d},
		"a control frame of 4 GiB":               {byte(frameHello), 0xff, 0xff, 0xff, 0xff},
		"an unknown frame type":                  {9, 0, 0, 0, 1},
		"a zero frame of 4 KiB":                  {byte(frameZero), 0, 0, 0x10, 0},
		"a chunk before the chunk size is known": {byte(frameChunk), 0, 0, 0, 20},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			cs := 4096
			if strings.Contains(name, "before") {
				cs = 0
			}
			_, p, err := readFrame(bytes.NewReader(b), nil, cs)
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("err %v, want a protocol error", err)
			}
			if cap(p) != 0 {
				t.Errorf("allocated %d bytes for a refused frame", cap(p))
			}
		})
	}
}

// FuzzReadFrame feeds arbitrary bytes to the frame reader and decoders. Properties: nothing panics; a
// frame is never larger than its type allows (so memory stays bounded by the chunk size); a frame that
// decodes re-encodes to exactly the bytes it was read from (one encoding per message, nothing ignored).
func FuzzReadFrame(f *testing.F) {
	f.Add(encodeHello(nil, hello{Version: 1, TransferID: "t", Size: 10, ChunkSize: 4096}), uint8(0))
	f.Add(encodeResume(nil, resume{NextChunk: 3}), uint8(1))
	f.Add(append(appendChunkHeader(nil, chunk{Index: 1, Sum: 0, Data: []byte("abc")}), "abc"...), uint8(1))
	f.Add(encodeZero(nil, zero{Index: 2}), uint8(1))
	f.Add(encodeVerifying(nil, verifying{Bytes: 1 << 20}), uint8(2))
	f.Add(encodeDone(nil, done{}), uint8(1))
	f.Add(encodeResult(nil, result{Message: "no \xff"}), uint8(2))
	f.Add([]byte{byte(frameResult), 0, 0, 0, 3, 2, 0, 0}, uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, sel uint8) {
		cs := []int{0, MinChunkSize, 64 << 10}[int(sel)%3]
		r := bytes.NewReader(b)
		typ, p, err := readFrame(r, nil, cs)
		if err != nil {
			return
		}
		limit, lerr := maxPayload(typ, cs)
		if lerr != nil || len(p) > limit {
			t.Fatalf("%s frame of %d bytes accepted, limit %d (%v)", typ, len(p), limit, lerr)
		}
		raw := b[:frameHeaderLen+len(p)]
		var re []byte
		switch typ {
		case frameHello:
			h, err := decodeHello(p)
			if err != nil {
				return
			}
			re = encodeHello(nil, h)
		case frameResume:
			v, err := decodeResume(p)
			if err != nil {
				return
			}
			re = encodeResume(nil, v)
		case frameChunk:
			c, err := decodeChunk(p)
			if err != nil {
				return
			}
			if len(c.Data) > cs {
				t.Fatalf("chunk of %d bytes accepted with chunk size %d", len(c.Data), cs)
			}
			re = append(appendChunkHeader(nil, c), c.Data...)
		case frameZero:
			z, err := decodeZero(p)
			if err != nil {
				return
			}
			re = encodeZero(nil, z)
		case frameVerifying:
			v, err := decodeVerifying(p)
			if err != nil {
				return
			}
			re = encodeVerifying(nil, v)
		case frameDone:
			d, err := decodeDone(p)
			if err != nil {
				return
			}
			re = encodeDone(nil, d)
		case frameResult:
			v, err := decodeResult(p)
			if err != nil {
				return
			}
			re = encodeResult(nil, v)
		default:
			t.Fatalf("readFrame accepted unknown type %d", typ)
		}
		if !bytes.Equal(re, raw) {
			t.Fatalf("%s frame decodes and re-encodes differently:\n read %x\n back %x", typ, raw, re)
		}
	})
}

// Every limit holds at its edge: a frame, a text exactly as long as allowed passes; one byte more is refused
// with a protocol error naming what was too long.
func TestFrames_LimitsHoldAtTheirEdges(t *testing.T) {
	frame := func(typ frameType, n int) []byte {
		return append(appendHeader(nil, typ, n), make([]byte, n)...)
	}
	for _, c := range []struct {
		typ       frameType
		chunkSize int
		limit     int
	}{{frameResult, 4096, maxControlPayload}, {frameZero, 4096, 8}, {frameChunk, MinChunkSize, chunkHeaderLen + MinChunkSize}} {
		if typ, p, err := readFrame(bytes.NewReader(frame(c.typ, c.limit)), nil, c.chunkSize); err != nil || typ != c.typ || len(p) != c.limit {
			t.Errorf("%s frame of %d bytes, its limit: %s, %d bytes, %v; want it read", c.typ, c.limit, typ, len(p), err)
		}
		if _, _, err := readFrame(bytes.NewReader(frame(c.typ, c.limit+1)), nil, c.chunkSize); !errors.Is(err, ErrProtocol) ||
			!strings.Contains(err.Error(), "at most") {
			t.Errorf("%s frame of %d bytes, one over its limit: %v; want a protocol error", c.typ, c.limit+1, err)
		}
	}

	hello := func(id string) []byte {
		_, p, err := readFrame(bytes.NewReader(encodeHello(nil, hello{Version: ProtocolVersion, TransferID: id, Size: 1, ChunkSize: MinChunkSize})), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if h, err := decodeHello(hello(strings.Repeat("a", maxTransferID))); err != nil || len(h.TransferID) != maxTransferID || h.Size != 1 {
		t.Errorf("a transfer ID of %d bytes, the most allowed: %+v, %v", maxTransferID, h, err)
	}
	for name, c := range map[string]struct {
		payload []byte
		want    string
	}{
		"a transfer ID one byte too long":  {hello(strings.Repeat("a", maxTransferID+1)), "text of 513 bytes, at most 512"},
		"a transfer ID that is not UTF-8":  {hello("ns/\xff"), "not UTF-8"},
		"bytes after a Hello's last field": {append(hello("t"), 0), "1 bytes after the last field"},
		"bytes after a Resume":             {make([]byte, 9), "1 bytes after the last field"},
		"a short Resume":                   {make([]byte, 7), "payload ends early"},
	} {
		var err error
		if strings.Contains(name, "Resume") {
			_, err = decodeResume(c.payload)
		} else {
			_, err = decodeHello(c.payload)
		}
		if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a protocol error saying %q", name, err, c.want)
		}
	}
}

// A verdict's message longer than a Result may carry is cut at a character boundary, never split inside a
// UTF-8 sequence; a short one is sent whole.
func TestResult_LongMessageCutAtACharacter(t *testing.T) {
	decode := func(msg string) string {
		_, p, err := readFrame(bytes.NewReader(encodeResult(nil, result{Message: msg})), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeResult(p)
		if err != nil {
			t.Fatalf("a Result carrying a %d-byte message: %v", len(msg), err)
		}
		return r.Message
	}
	if got := decode("short"); got != "short" {
		t.Errorf("a short message came back as %q", got)
	}
	exact := strings.Repeat("x", maxMessage)
	if got := decode(exact); got != exact {
		t.Errorf("a message of exactly %d bytes came back %d bytes long", maxMessage, len(got))
	}
	// "é" is two bytes: the cut at maxMessage falls inside the last one, which must go whole.
	long := strings.Repeat("x", maxMessage-1) + "é" + "tail"
	if got := decode(long); got != strings.Repeat("x", maxMessage-1) {
		t.Errorf("a %d-byte message came back as %d bytes ending %q; want the first %d bytes, the split character dropped", len(long), len(got), got[max(0, len(got)-4):], maxMessage-1)
	}
}

// The receiver reads every chunk into one buffer: a frame that fits the buffer, up to its whole capacity,
// allocates no new one (a copy of a large volume must not churn a chunk's worth of memory per frame). The
// frame header's few bytes are allocated either way; a buffer exactly the payload's size costs no more than
// a larger one, and one too small costs one more allocation.
func TestReadFrame_ReusesABufferThatFits(t *testing.T) {
	data := bytes.Repeat([]byte{1}, MinChunkSize)
	b := append(appendChunkHeader(nil, chunk{Index: 1, Data: data}), data...)
	r := bytes.NewReader(b)
	allocs := func(capacity int) float64 {
		buf := make([]byte, 0, capacity)
		return testing.AllocsPerRun(50, func() {
			r.Reset(b)
			typ, p, err := readFrame(r, buf, MinChunkSize)
			if err != nil || typ != frameChunk || len(p) != chunkHeaderLen+MinChunkSize {
				t.Fatalf("readFrame: %s, %d bytes, %v; want the chunk", typ, len(p), err)
			}
			if capacity >= len(p) && &p[0] != &buf[:1][0] {
				t.Fatal("a frame that fits the buffer was read into another")
			}
		})
	}
	exact, larger, smaller := allocs(chunkHeaderLen+MinChunkSize), allocs(2*MinChunkSize), allocs(MinChunkSize)
	if exact != larger || smaller != larger+1 {
		t.Errorf("allocations per frame: %.0f with a buffer of exactly its size, %.0f with a larger one, %.0f with a smaller one; want the first two equal and one more for the third", exact, larger, smaller)
	}
}
