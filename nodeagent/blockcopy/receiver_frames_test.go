package blockcopy

import (
	"errors"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// peer plays a sender frame by frame against a Receiver, to send what a correct sender never does.
type peer struct {
	t    *testing.T
	conn net.Conn
	done chan error
}

// startReceive serves a receiver of a 4-chunk transfer "move-1" (MinChunkSize chunks) on one end of a pipe
// and returns the other end after the Hello and the receiver's Resume.
func startReceive(t *testing.T) *peer {
	t.Helper()
	target, err := os.Create(filepath.Join(t.TempDir(), "target"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	if err := target.Truncate(4 * MinChunkSize); err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	r := &Receiver{Target: target, TargetSize: 4 * MinChunkSize, TransferID: "move-1"}
	p := &peer{t: t, conn: a, done: make(chan error, 1)}
	go func() {
		_, err := r.Receive(t.Context(), b)
		b.Close()
		p.done <- err
	}()
	p.send(encodeHello(nil, hello{Version: ProtocolVersion, TransferID: "move-1", Size: 4 * MinChunkSize, ChunkSize: MinChunkSize}))
	typ, payload, err := readFrame(a, nil, MinChunkSize)
	if err != nil || typ != frameResume {
		t.Fatalf("the receiver's answer to the Hello: %s, %v; want a Resume", typ, err)
	}
	if rs, err := decodeResume(payload); err != nil || rs.NextChunk != 0 {
		t.Fatalf("Resume %+v, %v; want chunk 0", rs, err)
	}
	return p
}

func (p *peer) send(b []byte) {
	if _, err := p.conn.Write(b); err != nil {
		p.t.Fatalf("send a frame: %v", err)
	}
}

func (p *peer) chunk(index uint64) {
	data := make([]byte, MinChunkSize)
	data[0] = byte(index + 1)
	p.send(append(appendChunkHeader(nil, chunk{Index: index, Sum: crc32.Checksum(data, castagnoli), Data: data}), data...))
}

// refused waits for the receiver to end with a protocol error saying want.
func (p *peer) refused(want string) {
	p.t.Helper()
	err := <-p.done
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), want) {
		p.t.Errorf("the receiver ended with %v; want a protocol error saying %q", err, want)
	}
}

// A chunk out of order, or one more than the transfer has, ends the copy at once with a protocol error
// naming it: the receiver writes every chunk at the offset of the one it expects, so accepting another
// would put data in the wrong place.
func TestReceive_ChunkOutOfOrderOrPastTheEnd_IsAProtocolError(t *testing.T) {
	t.Run("out of order", func(t *testing.T) {
		p := startReceive(t)
		p.chunk(0)
		go p.chunk(2) // the receiver stops reading at the refused frame's end
		p.refused("got chunk 2, expected chunk 1 of 4")
	})
	t.Run("past the end", func(t *testing.T) {
		p := startReceive(t)
		for i := range uint64(4) {
			p.chunk(i)
		}
		go p.chunk(4)
		p.refused("got chunk 4, expected chunk 4 of 4")
	})
}

// A Result's flag is 0 or 1; any other value is a protocol error, not a verdict of "failed".
func TestDecodeResult_FlagOtherThanZeroOrOne_IsAProtocolError(t *testing.T) {
	p := encodeResult(nil, result{OK: true, Message: "fine"})[frameHeaderLen:]
	p[0] = 2
	if _, err := decodeResult(p); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "neither 0 nor 1") {
		t.Errorf("a Result with flag 2: %v; want a protocol error", err)
	}
}
