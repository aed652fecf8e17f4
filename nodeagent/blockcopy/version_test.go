package blockcopy

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// A sender of another protocol version (version 1 sent every zero chunk as data) is refused before
// anything is written, with the reason and what to do.
func TestReceive_AnotherProtocolVersion_IsRefusedWithTheReason(t *testing.T) {
	path := filepath.Join(t.TempDir(), "target.img")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &Receiver{Target: f, TargetSize: 1 << 20, TransferID: "move-1", IdleTimeout: time.Minute, Clock: clock.RealClock{}}
	recv, send := net.Pipe()
	errc := make(chan error, 1)
	go func() {
		_, err := r.Receive(t.Context(), recv)
		recv.Close()
		errc <- err
	}()
	defer send.Close()
	if _, err := send.Write(encodeHello(nil, hello{Version: 1, TransferID: "move-1", Size: 1 << 20, ChunkSize: 1 << 20})); err != nil {
		t.Fatal(err)
	}
	typ, p, err := readFrame(send, nil, 0)
	if err != nil || typ != frameResult {
		t.Fatalf("answer to a version 1 Hello: %s frame, %v; want a Result", typ, err)
	}
	res, err := decodeResult(p)
	const want = "protocol version 1, this agent speaks 2: run the same LVMS version on both nodes"
	if err != nil || res.OK || res.Message != want {
		t.Fatalf("result %+v (%v), want a refusal %q", res, err, want)
	}
	if err := <-errc; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("receiver: %v, want %q", err, want)
	}
}
