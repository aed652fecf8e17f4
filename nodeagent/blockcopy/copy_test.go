package blockcopy_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
)

// volume is a source file and a target file (a little larger, as an LV rounded up to extents is) in one
// test's directory, with the receiver's progress file.
type volume struct {
	dir, src, dst, progress string
	size                    int64
	sum                     string
	srcF, dstF              *os.File
}

func newVolume(t *testing.T, size int64) *volume {
	t.Helper()
	dir := t.TempDir()
	v := &volume{dir: dir, size: size, progress: filepath.Join(dir, "progress.json")}
	v.src, v.sum = randomFile(t, dir, size, uint64(size))
	v.dst = emptyFile(t, dir, "target.img", size+1<<20)
	v.srcF = open(t, v.src, os.O_RDONLY)
	v.dstF = open(t, v.dst, os.O_RDWR)
	return v
}

func (v *volume) sender(id string, cs int) *blockcopy.Sender {
	return &blockcopy.Sender{Source: v.srcF, Size: v.size, TransferID: id, ChunkSize: cs, Clock: clock.RealClock{}}
}

func (v *volume) receiver(t *testing.T, id string) *blockcopy.Receiver {
	return &blockcopy.Receiver{Target: v.dstF, TargetSize: size(t, v.dstF), TransferID: id,
		Progress: blockcopy.FileProgress{Path: v.progress}, SyncEvery: 256 << 10, Clock: clock.RealClock{}}
}

func (v *volume) loadProgress(t *testing.T) blockcopy.Progress {
	t.Helper()
	p, err := blockcopy.FileProgress{Path: v.progress}.Load()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// requireUntouched fails unless the target is still all zeros and no progress was recorded.
func (v *volume) requireUntouched(t *testing.T) {
	t.Helper()
	zero := emptyFile(t, t.TempDir(), "zero.img", v.size)
	if got, want := sha256File(t, v.dst, v.size), sha256File(t, zero, v.size); got != want {
		t.Errorf("the target was written although the transfer was refused")
	}
	if _, err := os.Stat(v.progress); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("progress was recorded although the transfer was refused (%v)", err)
	}
}

// cancelAt is a source that cancels the copy once the sender reads at or beyond offset: the copy is
// killed mid-way.
type cancelAt struct {
	io.ReaderAt
	offset int64
	cancel func()
}

func (c cancelAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.offset {
		c.cancel()
	}
	return c.ReaderAt.ReadAt(p, off)
}

func TestCopy_OverMutualTLS_TargetHashesLikeSource(t *testing.T) {
	p := newPKI(t)
	v := newVolume(t, 8<<20+12345) // not a multiple of the chunk size: the last chunk is short
	a, b := p.identity(t, "node-a"), p.identity(t, "node-b")
	o := run(t, t.Context(), v.sender("move-1", 256<<10), v.receiver(t, "move-1"),
		tlsClient(a.ClientConfig("node-b")), tlsServer(b.ServerConfig("node-a")), nil)
	if o.sendErr != nil || o.recvErr != nil {
		t.Fatalf("copy failed: sender %v, receiver %v", o.sendErr, o.recvErr)
	}
	if got := sha256File(t, v.dst, v.size); got != v.sum {
		t.Fatalf("target SHA-256 %s, source %s", got, v.sum)
	}
	if o.sent.SHA256 != v.sum || o.recv.SHA256 != v.sum {
		t.Errorf("reported digests: sender %s, receiver %s, want %s", o.sent.SHA256, o.recv.SHA256, v.sum)
	}
	if o.sent.Chunks != 33 || o.sent.BytesSent != v.size || o.sent.Skipped != 0 {
		t.Errorf("sender stats %+v, want 33 chunks, %d bytes, none skipped", o.sent, v.size)
	}
	if pr := v.loadProgress(t); pr.NextChunk != 33 || pr.SHA256 != v.sum {
		t.Errorf("progress after the copy %+v, want all 33 chunks and the digest", pr)
	}
}

func TestCopy_KilledMidway_ResumesAtHighWaterMarkAndVerifiesWhole(t *testing.T) {
	const cs = 64 << 10
	v := newVolume(t, 16<<20)
	ctx, cancel := context.WithCancel(t.Context())
	s := v.sender("move-1", cs)
	s.Source = cancelAt{ReaderAt: v.srcF, offset: 10 << 20, cancel: cancel}
	o := run(t, ctx, s, v.receiver(t, "move-1"), plain, plain, nil)
	if !errors.Is(o.sendErr, context.Canceled) {
		t.Fatalf("sender after the kill: %v, want context canceled", o.sendErr)
	}
	if o.recvErr == nil {
		t.Fatal("the receiver reported success for a copy that was killed")
	}
	mark := v.loadProgress(t).NextChunk
	if mark == 0 || mark >= 256 {
		t.Fatalf("high-water mark after the kill is chunk %d, want between 1 and 255", mark)
	}

	o = run(t, t.Context(), v.sender("move-1", cs), v.receiver(t, "move-1"), plain, plain, nil)
	if o.sendErr != nil || o.recvErr != nil {
		t.Fatalf("resumed copy failed: sender %v, receiver %v", o.sendErr, o.recvErr)
	}
	if o.sent.Skipped != mark || o.sent.BytesSent != v.size-int64(mark)*cs {
		t.Errorf("resumed copy skipped %d chunks and sent %d bytes, want %d skipped and %d bytes", o.sent.Skipped, o.sent.BytesSent, mark, v.size-int64(mark)*cs)
	}
	if got := sha256File(t, v.dst, v.size); got != v.sum {
		t.Fatalf("target SHA-256 %s after resuming, source %s", got, v.sum)
	}
}

func TestCopy_TargetChangedBeforeResume_MismatchIsCaughtAndNextAttemptStartsOver(t *testing.T) {
	const cs = 64 << 10
	v := newVolume(t, 4<<20)
	ctx, cancel := context.WithCancel(t.Context())
	r := v.receiver(t, "move-1")
	// Killed once the receiver recorded a mark (the sender may be megabytes ahead in the socket buffers).
	r.OnProgress = func(next, total uint64) { cancel() }
	run(t, ctx, v.sender("move-1", cs), r, plain, plain, nil)
	if v.loadProgress(t).NextChunk == 0 {
		t.Fatal("no progress recorded before the kill")
	}
	// Someone writes to the target's already copied part while no copy runs.
	if _, err := v.dstF.WriteAt([]byte("scribble"), 100); err != nil {
		t.Fatal(err)
	}
	o := run(t, t.Context(), v.sender("move-1", cs), v.receiver(t, "move-1"), plain, plain, nil)
	if !errors.Is(o.sendErr, blockcopy.ErrChecksumMismatch) && !strings.Contains(errString(o.sendErr), "differs from the source") {
		t.Fatalf("sender: %v, want a SHA-256 mismatch", o.sendErr)
	}
	if !errors.Is(o.recvErr, blockcopy.ErrChecksumMismatch) {
		t.Fatalf("receiver: %v, want a SHA-256 mismatch", o.recvErr)
	}
	if pr := v.loadProgress(t); pr.NextChunk != 0 || pr.SHA256 != "" {
		t.Fatalf("progress after a mismatch %+v, want a restart from chunk 0", pr)
	}
	o = run(t, t.Context(), v.sender("move-1", cs), v.receiver(t, "move-1"), plain, plain, nil)
	if o.sendErr != nil || o.recvErr != nil || o.sent.Skipped != 0 {
		t.Fatalf("third attempt: sender %v, receiver %v, skipped %d (want a full copy)", o.sendErr, o.recvErr, o.sent.Skipped)
	}
	if got := sha256File(t, v.dst, v.size); got != v.sum {
		t.Fatalf("target SHA-256 %s, source %s", got, v.sum)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestCopy_CorruptedChunk_IsRefusedAndResumeStartsAtIt(t *testing.T) {
	const cs = 64 << 10
	const id = "move-1"
	v := newVolume(t, 1<<20)
	helloLen := 5 + 2 + 2 + len(id) + 8 + 4
	flipAt := int64(helloLen + 3*(5+12+cs) + 5 + 12 + 1000) // a byte of chunk 3's data
	var once sync.Once
	corrupt := func(from, to net.Conn) {
		buf := make([]byte, 32<<10)
		var pos int64
		for {
			n, err := from.Read(buf)
			if n > 0 {
				if flipAt >= pos && flipAt < pos+int64(n) {
					once.Do(func() { buf[flipAt-pos] ^= 0x40 })
				}
				pos += int64(n)
				if _, werr := to.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	r := v.receiver(t, id)
	r.SyncEvery = cs // record the mark after every chunk
	o := run(t, t.Context(), v.sender(id, cs), r, plain, plain, corrupt)
	if o.recvErr == nil || !strings.Contains(o.recvErr.Error(), "chunk 3 (bytes 196608-262143) arrived corrupted") {
		t.Fatalf("receiver: %v, want chunk 3 refused as corrupted", o.recvErr)
	}
	if o.sendErr == nil {
		t.Fatal("the sender reported success for a copy whose chunk 3 was corrupted")
	}
	if mark := v.loadProgress(t).NextChunk; mark != 3 {
		t.Fatalf("high-water mark %d after the corrupted chunk, want 3 (chunks 0-2 verified)", mark)
	}
	o = run(t, t.Context(), v.sender(id, cs), v.receiver(t, id), plain, plain, nil)
	if o.sendErr != nil || o.recvErr != nil || o.sent.Skipped != 3 {
		t.Fatalf("rerun: sender %v, receiver %v, skipped %d (want 3)", o.sendErr, o.recvErr, o.sent.Skipped)
	}
	if got := sha256File(t, v.dst, v.size); got != v.sum {
		t.Fatalf("target SHA-256 %s, source %s", got, v.sum)
	}
}

func TestCopy_OtherTransferOrSmallerTarget_IsRefusedBeforeAnyWrite(t *testing.T) {
	t.Run("another transfer's ID", func(t *testing.T) {
		v := newVolume(t, 1<<20)
		o := run(t, t.Context(), v.sender("move-other", 0), v.receiver(t, "move-1"), plain, plain, nil)
		if o.sendErr == nil || !strings.Contains(o.sendErr.Error(), `the receiver refused the transfer: transfer "move-other" is not the one this receiver waits for ("move-1")`) {
			t.Fatalf("sender: %v", o.sendErr)
		}
		v.requireUntouched(t)
	})
	t.Run("a target smaller than the source", func(t *testing.T) {
		v := newVolume(t, 1<<20)
		r := v.receiver(t, "move-1")
		r.TargetSize = 512 << 10
		o := run(t, t.Context(), v.sender("move-1", 0), r, plain, plain, nil)
		if o.sendErr == nil || !strings.Contains(o.sendErr.Error(), "the source has 1048576 bytes and the target 524288") {
			t.Fatalf("sender: %v", o.sendErr)
		}
		v.requireUntouched(t)
	})
}

func TestCopy_MutualTLS_RefusesStrangers(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t) // another CA: certificates for the same node names
	cases := []struct {
		name string
		// sender's identity and the node it expects; receiver's identity and the node it expects
		send, recv         *blockcopy.Identity
		sendWant, recvWant string
		wantSendErr        string
		wantRecvErr        string
	}{
		{
			name: "a sender with a certificate from another CA",
			send: other.identityTrusting(t, "node-a", p), sendWant: "node-b",
			recv: p.identity(t, "node-b"), recvWant: "node-a",
			wantRecvErr: "its certificate is not from the LVMS transfer CA",
		},
		{
			name: "a sender whose certificate is for another node",
			send: p.identity(t, "node-c"), sendWant: "node-b",
			recv: p.identity(t, "node-b"), recvWant: "node-a",
			wantRecvErr: `its certificate is for node "node-c", expected node "node-a"`,
		},
		{
			name: "a receiver whose certificate is for another node",
			send: p.identity(t, "node-a"), sendWant: "node-b",
			recv: p.identity(t, "node-c"), recvWant: "node-a",
			wantSendErr: `its certificate is for node "node-c", expected node "node-b"`,
		},
		{
			name: "a receiver with a certificate from another CA",
			send: p.identity(t, "node-a"), sendWant: "node-b",
			recv: other.identityTrusting(t, "node-b", p), recvWant: "node-a",
			wantSendErr: "its certificate is not from the LVMS transfer CA",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := newVolume(t, 1<<20)
			o := run(t, t.Context(), v.sender("move-1", 0), v.receiver(t, "move-1"),
				tlsClient(tc.send.ClientConfig(tc.sendWant)), tlsServer(tc.recv.ServerConfig(tc.recvWant)), nil)
			if o.sendErr == nil || o.recvErr == nil {
				t.Fatalf("the copy was not refused: sender %v, receiver %v", o.sendErr, o.recvErr)
			}
			if tc.wantRecvErr != "" && !strings.Contains(o.recvErr.Error(), tc.wantRecvErr) {
				t.Errorf("receiver: %v, want %q", o.recvErr, tc.wantRecvErr)
			}
			if tc.wantSendErr != "" && !strings.Contains(o.sendErr.Error(), tc.wantSendErr) {
				t.Errorf("sender: %v, want %q", o.sendErr, tc.wantSendErr)
			}
			v.requireUntouched(t)
		})
	}
}

func TestNewIdentity_RefusesAnotherNodesCertificate(t *testing.T) {
	p := newPKI(t)
	b := p.identity(t, "node-b")
	cfg := b.ServerConfig("node-a")
	_, err := blockcopy.NewIdentity("node-a", cfg.Certificates[0], nil, p.clock)
	if err == nil || !strings.Contains(err.Error(), `the transfer certificate is for node "node-b", this agent runs on "node-a"`) {
		t.Fatalf("NewIdentity with node-b's certificate on node-a: %v", err)
	}
}

func TestCopy_SilentPeer_TimesOutAndCancelEndsAtOnce(t *testing.T) {
	v := newVolume(t, 1<<20)
	silent := func(from, to net.Conn) { _, _ = io.Copy(io.Discard, from) } // swallows everything
	s := v.sender("move-1", 0)
	r := v.receiver(t, "move-1")
	s.IdleTimeout, r.IdleTimeout = 200*time.Millisecond, time.Hour
	o := run(t, t.Context(), s, r, plain, plain, silent)
	if o.sendErr == nil || !strings.Contains(o.sendErr.Error(), "the peer sent nothing for 200ms") {
		t.Fatalf("sender facing a silent receiver: %v", o.sendErr)
	}
	s.IdleTimeout, r.IdleTimeout = time.Hour, 200*time.Millisecond
	o = run(t, t.Context(), s, r, plain, plain, func(from, to net.Conn) {
		_, _ = io.Copy(io.Discard, from)
		<-t.Context().Done()
	})
	if o.recvErr == nil || !strings.Contains(o.recvErr.Error(), "the peer sent nothing for 200ms") {
		t.Fatalf("receiver facing a silent sender: %v", o.recvErr)
	}

	ctx, cancel := context.WithCancel(t.Context())
	s.IdleTimeout, r.IdleTimeout = time.Hour, time.Hour
	go func() {
		// Cancel once the sender is blocked waiting for a Resume that never comes.
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	o = run(t, ctx, s, r, plain, plain, silent)
	if !errors.Is(o.sendErr, context.Canceled) || !errors.Is(o.recvErr, context.Canceled) {
		t.Fatalf("after cancel: sender %v, receiver %v, want context canceled on both", o.sendErr, o.recvErr)
	}
}

// slowTarget is a target whose reads take delay each (a large volume on a slow disk, scaled down); it counts
// them.
type slowTarget struct {
	*os.File
	delay time.Duration
	reads *atomic.Int64
}

func (s slowTarget) ReadAt(p []byte, off int64) (int, error) {
	s.reads.Add(1)
	time.Sleep(s.delay)
	return s.File.ReadAt(p, off)
}

// Reading the whole target back takes several idle timeouts: the receiver keeps the sender waiting (it says
// how far it read) and the copy verifies, instead of the sender giving up and every retry reading it all
// again. A second attempt of a transfer already verified is answered without reading the target again.
func TestCopy_SlowVerification_SenderKeepsWaiting_VerdictReused(t *testing.T) {
	v := newVolume(t, 2<<20)
	var reads atomic.Int64
	const idle = time.Second
	recv := v.receiver(t, "slow")
	recv.Target = slowTarget{File: v.dstF, delay: 100 * time.Millisecond, reads: &reads}
	recv.IdleTimeout = idle
	send := v.sender("slow", 64<<10) // 32 chunks to read back: about 3 s
	send.IdleTimeout = idle
	o := run(t, t.Context(), send, recv, plain, plain, nil)
	if o.sendErr != nil || o.recvErr != nil || o.sent.SHA256 != v.sum {
		t.Fatalf("a verification longer than the idle timeout: sender %v, receiver %v, digest %s (want %s)", o.sendErr, o.recvErr, o.sent.SHA256, v.sum)
	}
	if n := reads.Load(); n < 32 {
		t.Fatalf("the target was read %d times to verify it, want all 32 chunks", n)
	}
	reads.Store(0)
	o = run(t, t.Context(), v.sender("slow", 64<<10), recv, plain, plain, nil)
	if o.sendErr != nil || o.recvErr != nil || o.sent.SHA256 != v.sum || o.sent.BytesSent != 0 {
		t.Fatalf("the same transfer again: sender %v, receiver %v, digest %s, %d bytes sent", o.sendErr, o.recvErr, o.sent.SHA256, o.sent.BytesSent)
	}
	if n := reads.Load(); n != 0 {
		t.Fatalf("a target verified whole and not written since was read %d times again", n)
	}
}

// A transfer certificate names its node in exactly one well-formed lvms-node://node/<name> URI; anything
// else in such a URI (another host, no name, a path, a query, a fragment, a user) makes it malformed, and
// URIs of other schemes are not looked at.
func TestNodeName_OnlyAWellFormedNodeURI(t *testing.T) {
	cert := func(uris ...string) *x509.Certificate {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: "agent"}}
		for _, s := range uris {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			c.URIs = append(c.URIs, u)
		}
		return c
	}
	if got, err := blockcopy.NodeName(cert("spiffe://cluster/agent", "lvms-node://node/node-a")); err != nil || got != "node-a" {
		t.Errorf("a well-formed node URI beside another scheme's: %q, %v; want node-a", got, err)
	}
	for _, u := range []string{"lvms-node://other/node-a", "lvms-node://node/", "lvms-node://node/a/b", "lvms-node://node/node-a?x=1",
		"lvms-node://node/node-a#f", "lvms-node://user@node/node-a"} {
		if _, err := blockcopy.NodeName(cert(u)); err == nil || !strings.Contains(err.Error(), "malformed node URI") {
			t.Errorf("NodeName with %s: %v; want it called malformed", u, err)
		}
	}
	if _, err := blockcopy.NodeName(cert("lvms-node://node/a", "lvms-node://node/b")); err == nil || !strings.Contains(err.Error(), "names 2 nodes") {
		t.Errorf("two node URIs: %v", err)
	}
	if _, err := blockcopy.NodeName(cert()); err == nil || !strings.Contains(err.Error(), "names no node") {
		t.Errorf("no node URI: %v", err)
	}
}

// A certificate whose parsed leaf was not kept (tls.Certificate.Leaf nil) is parsed from its DER.
func TestNewIdentity_ParsesACertificateWithoutItsLeaf(t *testing.T) {
	p := newPKI(t)
	cfg := p.identity(t, "node-a").ServerConfig("node-b")
	cert := cfg.Certificates[0]
	cert.Leaf = nil
	caPEM, _, err := p.ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	if _, err := blockcopy.NewIdentity("node-a", cert, roots, p.clock); err != nil {
		t.Errorf("NewIdentity with the leaf left to parse: %v", err)
	}
}
