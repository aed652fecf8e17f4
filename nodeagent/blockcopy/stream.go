package blockcopy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// DefaultIdleTimeout is how long one frame may take to arrive or leave when no timeout is given.
const DefaultIdleTimeout = 2 * time.Minute

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stream is one side's end of a transfer: a connection with a deadline per frame, buffered writes, and
// cancellation by context.
type stream struct {
	conn    net.Conn
	w       *bufio.Writer
	clock   clock.PassiveClock
	timeout time.Duration
	ctx     context.Context
	stop    func() bool
}

func newStream(ctx context.Context, conn net.Conn, clk clock.PassiveClock, timeout time.Duration) *stream {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if timeout <= 0 {
		timeout = DefaultIdleTimeout
	}
	s := &stream{conn: conn, w: bufio.NewWriterSize(conn, 256<<10), clock: clk, timeout: timeout, ctx: ctx}
	// A deadline in the past wakes every blocked read and write at once.
	s.stop = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return s
}

// close stops watching the context.
func (s *stream) close() { s.stop() }

// wrap turns an I/O error into the context's error when the context ended, and names a timeout.
func (s *stream) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := s.ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", what, context.Cause(s.ctx))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%s: the peer sent nothing for %s: %w", what, s.timeout, err)
	}
	// A peer that closes with data of ours unread resets the connection instead of ending it: the same stop.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%s: the peer closed the connection (a stopped or restarted agent; the next attempt resumes): %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (s *stream) readFrame(buf []byte, chunkSize int) (frameType, []byte, error) {
	if err := s.conn.SetReadDeadline(s.clock.Now().Add(s.timeout)); err != nil {
		return 0, buf, s.wrap("set read deadline", err)
	}
	t, p, err := readFrame(s.conn, buf, chunkSize)
	return t, p, s.wrap("read frame", err)
}

// write writes parts as one frame (buffered); flush sends what is buffered.
func (s *stream) write(parts ...[]byte) error {
	if err := s.conn.SetWriteDeadline(s.clock.Now().Add(s.timeout)); err != nil {
		return s.wrap("set write deadline", err)
	}
	for _, p := range parts {
		if _, err := s.w.Write(p); err != nil {
			return s.wrap("write frame", err)
		}
	}
	return nil
}

func (s *stream) flush() error {
	if err := s.conn.SetWriteDeadline(s.clock.Now().Add(s.timeout)); err != nil {
		return s.wrap("set write deadline", err)
	}
	return s.wrap("write frame", s.w.Flush())
}

// expect reads one frame and fails unless it has type want.
func (s *stream) expect(want frameType, buf []byte) ([]byte, error) {
	t, p, err := s.readFrame(buf, 0)
	if err != nil {
		return p, err
	}
	if t != want {
		return p, protoErr("got a %s frame, expected %s", t, want)
	}
	return p, nil
}

// chunkCount is the number of chunks of size chunkSize that cover size bytes.
func chunkCount(size int64, chunkSize int) uint64 {
	return uint64((size + int64(chunkSize) - 1) / int64(chunkSize))
}

// chunkLen is the length of chunk i.
func chunkLen(size int64, chunkSize int, i uint64) int {
	off := int64(i) * int64(chunkSize)
	return int(min(int64(chunkSize), size-off))
}

// zeroPage is compared against: bytes.Equal is the fastest test for zeros the standard library has.
var zeroPage [4096]byte

// isZero reports whether b is all zeros.
func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}
