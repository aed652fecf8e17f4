package blockcopy

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// peer plays a sender frame by frame against a Receiver, to send what a correct sender never does.
type peer struct {
	t       *testing.T
	conn    net.Conn
	done    chan error
	resumed uint64 // the chunk the receiver's Resume named
}

// targetFile is an empty target of size bytes, closed when the test ends.
func targetFile(t *testing.T, size int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "target"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f
}

// startReceive serves a receiver of a 4-chunk transfer "move-1" (MinChunkSize chunks) on one end of a pipe
// and returns the other end after the Hello and the receiver's Resume.
func startReceive(t *testing.T) *peer { return startReceiveWith(t, nil, nil) }

// startReceiveWith is startReceive with the receiver adjusted by setup (its target already set) before it
// serves, and its end of the pipe wrapped by wrap; the Resume may then name another chunk than 0
// (p.resumed). Either may be nil.
func startReceiveWith(t *testing.T, setup func(r *Receiver), wrap func(net.Conn) net.Conn) *peer {
	t.Helper()
	target := targetFile(t, 4*MinChunkSize)
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	r := &Receiver{Target: target, TargetSize: 4 * MinChunkSize, TransferID: "move-1"}
	if setup != nil {
		setup(r)
	}
	p := &peer{t: t, conn: a, done: make(chan error, 1)}
	var conn net.Conn = b
	if wrap != nil {
		conn = wrap(b)
	}
	go func() {
		_, err := r.Receive(t.Context(), conn)
		b.Close()
		p.done <- err
	}()
	p.send(encodeHello(nil, hello{Version: ProtocolVersion, TransferID: "move-1", Size: 4 * MinChunkSize, ChunkSize: MinChunkSize}))
	typ, payload, err := readFrame(a, nil, MinChunkSize)
	if err != nil || typ != frameResume {
		t.Fatalf("the receiver's answer to the Hello: %s, %v; want a Resume", typ, err)
	}
	rs, err := decodeResume(payload)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	p.resumed = rs.NextChunk
	return p
}

func (p *peer) send(b []byte) {
	if _, err := p.conn.Write(b); err != nil {
		p.t.Fatalf("send a frame: %v", err)
	}
}

// chunkData is what the peer sends as chunk index; sourceSum is the SHA-256 of all four.
func chunkData(index uint64) []byte {
	data := make([]byte, MinChunkSize)
	data[0] = byte(index + 1)
	return data
}

func sourceSum() [32]byte {
	h := sha256.New()
	for i := range uint64(4) {
		h.Write(chunkData(i))
	}
	return [32]byte(h.Sum(nil))
}

func (p *peer) chunk(index uint64) {
	data := chunkData(index)
	p.send(append(appendChunkHeader(nil, chunk{Index: index, Sum: crc32.Checksum(data, castagnoli), Data: data}), data...))
}

// verdict sends Done with the source's digest and reads the receiver's frames up to its Result: the
// Verifying frames' byte counts and the Result.
func (p *peer) verdict() ([]uint64, result) {
	p.t.Helper()
	p.send(encodeDone(nil, done{SHA256: sourceSum()}))
	var verifying []uint64
	for {
		typ, payload, err := readFrame(p.conn, nil, MinChunkSize)
		if err != nil {
			p.t.Fatalf("read the receiver's answer to Done: %v", err)
		}
		switch typ {
		case frameVerifying:
			v, err := decodeVerifying(payload)
			if err != nil {
				p.t.Fatal(err)
			}
			verifying = append(verifying, v.Bytes)
		case frameResult:
			res, err := decodeResult(payload)
			if err != nil {
				p.t.Fatal(err)
			}
			return verifying, res
		default:
			p.t.Fatalf("the receiver sent a %s frame after Done", typ)
		}
	}
}

// refused waits for the receiver to end with a protocol error saying want.
func (p *peer) refused(want string) {
	p.t.Helper()
	var err error
	select {
	case err = <-p.done:
	case <-time.After(10 * time.Second): // a bound on the wait, not a measurement: the refusal is immediate
		p.t.Fatalf("the receiver took the frame and waits for more; want a protocol error saying %q", want)
	}
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

// A target exactly as large as the source is enough; one byte smaller is refused.
func TestReceive_TargetExactlyTheSourcesSize_IsAccepted(t *testing.T) {
	p := startReceive(t) // target and source are both 4 chunks
	for i := range uint64(4) {
		p.chunk(i)
	}
	if _, res := p.verdict(); !res.OK {
		t.Fatalf("a copy onto a target of exactly the source's size: %q", res.Message)
	}
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
	r := &Receiver{TargetSize: 4*MinChunkSize - 1, TransferID: "move-1"}
	if err := r.checkHello(hello{Version: ProtocolVersion, TransferID: "move-1", Size: 4 * MinChunkSize, ChunkSize: MinChunkSize}); err == nil ||
		!strings.Contains(err.Error(), "the target must be at least as large") {
		t.Errorf("a target one byte smaller than the source: %v", err)
	}
}

// A copy whose every chunk an earlier attempt wrote, but whose verification never finished (no digest in
// the record), reads the whole target back before it says OK: here the target was changed meanwhile, and
// the receiver finds it.
func TestReceive_AllChunksThereButNeverVerified_ReadsTheTargetBack(t *testing.T) {
	p := startReceiveWith(t, func(r *Receiver) {
		r.Progress = memProgress{&Progress{TransferID: "move-1", Size: 4 * MinChunkSize, ChunkSize: MinChunkSize, NextChunk: 4}}
	}, nil)
	if p.resumed != 4 {
		t.Fatalf("the receiver resumed at chunk %d, want 4 (all there)", p.resumed)
	}
	_, res := p.verdict() // the target holds zeros, not the source's chunks
	if res.OK || !strings.Contains(res.Message, "differs from the source's") {
		t.Errorf("verdict OK=%v %q; want a mismatch: the target was never read back", res.OK, res.Message)
	}
	if err := <-p.done; !errors.Is(err, ErrChecksumMismatch) {
		t.Errorf("the receiver ended with %v, want ErrChecksumMismatch", err)
	}
}

// memProgress is a ProgressStore in memory.
type memProgress struct{ p *Progress }

func (m memProgress) Load() (Progress, error) { return *m.p, nil }
func (m memProgress) Save(p Progress) error   { *m.p = p; return nil }

// steppingClock advances by step at every reading.
type steppingClock struct {
	now  time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time                  { c.now = c.now.Add(c.step); return c.now }
func (c *steppingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// While the receiver reads the target back it tells the sender how far it got each time a quarter of the
// idle timeout has passed, and not more often: with no time passing, no Verifying frame; with a quarter
// passing at every reading of the clock, one after every chunk read, each with the bytes read so far.
func TestReceive_VerifyingFramesEveryQuarterOfTheIdleTimeout(t *testing.T) {
	const idle = time.Minute
	for _, c := range []struct {
		step time.Duration
		want []uint64
	}{
		{0, nil},
		{idle / 4, []uint64{MinChunkSize, 2 * MinChunkSize, 3 * MinChunkSize, 4 * MinChunkSize}},
	} {
		t.Run(fmt.Sprint(c.step), func(t *testing.T) {
			p := startReceiveWith(t, func(r *Receiver) {
				r.IdleTimeout = idle
				r.Clock = &steppingClock{now: time.Now(), step: c.step}
			}, nil)
			for i := range uint64(4) {
				p.chunk(i)
			}
			got, res := p.verdict()
			if !res.OK || res.SHA256 != sourceSum() {
				t.Fatalf("verdict OK=%v %q", res.OK, res.Message)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("Verifying frames said %v bytes read, want %v", got, c.want)
			}
			if err := <-p.done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A sender that goes away right after Done never gets the verdict: the receiver says so (the target is
// verified and recorded, so the next attempt gets the same verdict at once) instead of reporting success.
// The connection fails only when the Result is sent, as a TCP connection whose peer is gone does.
func TestReceive_SenderGoneBeforeTheVerdict_IsAnError(t *testing.T) {
	broken := &failingWrites{}
	p := startReceiveWith(t, nil, func(c net.Conn) net.Conn { broken.Conn = c; return broken })
	for i := range uint64(4) {
		p.chunk(i)
	}
	broken.fail.Store(true)
	p.send(encodeDone(nil, done{SHA256: sourceSum()}))
	if err := <-p.done; !errors.Is(err, errBrokenPipe) {
		t.Errorf("the receiver ended with %v; want the failed send of its Result", err)
	}
}

var errBrokenPipe = errors.New("broken pipe")

// failingWrites is a connection whose writes fail once fail is set.
type failingWrites struct {
	net.Conn
	fail atomic.Bool
}

func (f *failingWrites) Write(b []byte) (int, error) {
	if f.fail.Load() {
		return 0, errBrokenPipe
	}
	return f.Conn.Write(b)
}

func TestCheckChunkSize(t *testing.T) {
	for n, ok := range map[int]bool{
		MinChunkSize: true, MaxChunkSize: true, DefaultChunkSize: true, 64 << 10: true,
		MinChunkSize - 4096 + 1: false, 0: false, MinChunkSize + 1: false, MaxChunkSize + 4096: false, MaxChunkSize - 1: false, -4096: false,
	} {
		if err := checkChunkSize(n); (err == nil) != ok {
			t.Errorf("checkChunkSize(%d) = %v, want ok=%v", n, err, ok)
		}
	}
}

// A sender refuses what no receiver could accept before it sends a byte: no size, no transfer ID, one
// longer than the protocol carries. An ID of exactly the longest length copies.
func TestSend_RefusesBadArgumentsBeforeSendingAnything(t *testing.T) {
	src := bytes.NewReader(make([]byte, MinChunkSize))
	for _, c := range []struct {
		s    Sender
		want string
	}{
		{Sender{Source: src, Size: 0, TransferID: "move-1"}, "nothing to copy"},
		{Sender{Source: src, Size: -1, TransferID: "move-1"}, "nothing to copy"},
		{Sender{Source: src, Size: MinChunkSize}, "must be 1 to 512 bytes"},
		{Sender{Source: src, Size: MinChunkSize, TransferID: strings.Repeat("m", maxTransferID+1)}, "must be 1 to 512 bytes"},
	} {
		a, b := net.Pipe()
		c.s.IdleTimeout = time.Second // nothing reads b: a frame sent would wait this long, then fail
		_, err := c.s.Send(t.Context(), a)
		a.Close()
		b.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Send with size %d and a %d-byte ID: %v; want %q", c.s.Size, len(c.s.TransferID), err, c.want)
		}
	}

	id := strings.Repeat("m", maxTransferID)
	target := targetFile(t, MinChunkSize)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	recvErr := make(chan error, 1)
	go func() {
		_, err := (&Receiver{Target: target, TargetSize: MinChunkSize, TransferID: id}).Receive(t.Context(), b)
		recvErr <- err
	}()
	s := Sender{Source: src, Size: MinChunkSize, TransferID: id, ChunkSize: MinChunkSize}
	if _, err := s.Send(t.Context(), a); err != nil {
		t.Errorf("a copy with a %d-byte transfer ID, the longest allowed: %v", len(id), err)
	}
	if err := <-recvErr; err != nil {
		t.Errorf("its receiver: %v", err)
	}
}

// sendAgainst runs a Sender of a one-chunk volume against answer, which plays the receiver on the other end
// of a pipe after reading the Hello, and returns the sender's error.
func sendAgainst(t *testing.T, answer func(c net.Conn)) error {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		defer b.Close()
		if _, _, err := readFrame(b, nil, 0); err != nil { // the Hello
			return
		}
		answer(b)
	}()
	s := Sender{Source: bytes.NewReader(chunkData(0)), Size: MinChunkSize, TransferID: "move-1", ChunkSize: MinChunkSize, IdleTimeout: 5 * time.Second}
	_, err := s.Send(t.Context(), a)
	return err
}

// The receiver's Verifying frames only move forward and never past the volume's size; the sender refuses
// any that goes back or beyond, and accepts a repeat and the whole size.
func TestSend_VerifyingThatGoesBackOrPastTheSize_IsAProtocolError(t *testing.T) {
	run := func(counts ...uint64) error {
		return sendAgainst(t, func(c net.Conn) {
			c.Write(encodeResume(nil, resume{}))
			for {
				typ, _, err := readFrame(c, nil, MinChunkSize)
				if err != nil || typ == frameDone {
					break
				}
			}
			for _, n := range counts {
				if _, err := c.Write(encodeVerifying(nil, verifying{Bytes: n})); err != nil {
					return
				}
			}
			c.Write(encodeResult(nil, result{OK: true, SHA256: sha256.Sum256(chunkData(0))}))
		})
	}
	if err := run(100, 100, MinChunkSize); err != nil {
		t.Errorf("Verifying 100, 100 and the whole size: %v; want the copy done", err)
	}
	for _, counts := range [][]uint64{{200, 100}, {MinChunkSize + 1}} {
		if err := run(counts...); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "says it verified") {
			t.Errorf("Verifying %v: %v; want a protocol error", counts, err)
		}
	}
}

// A receiver that answers the Hello with a Result refuses the transfer and says why; an answer that is no
// refusal (a Result that is not a valid one, or one that says OK) is a protocol error, never "refused".
func TestSend_HelloAnsweredByAResult(t *testing.T) {
	answer := func(b []byte) error { return sendAgainst(t, func(c net.Conn) { c.Write(b) }) }
	if err := answer(encodeResult(nil, result{Message: "no room"})); err == nil || !strings.Contains(err.Error(), "the receiver refused the transfer: no room") {
		t.Errorf("a refusal: %v", err)
	}
	bad := encodeResult(nil, result{Message: "x"})
	bad[frameHeaderLen] = 7 // the flag
	for name, b := range map[string][]byte{"malformed": bad, "OK": encodeResult(nil, result{OK: true, Message: "fine"})} {
		if err := answer(b); !errors.Is(err, ErrProtocol) || strings.Contains(err.Error(), "refused") {
			t.Errorf("a %s Result for an answer: %v; want a protocol error", name, err)
		}
	}
}
