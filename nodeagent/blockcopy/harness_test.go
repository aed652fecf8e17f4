package blockcopy_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
	"github.com/lvms-dev/lvms/operator/transferca"
)

// agentUser is the node agent's ServiceAccount user in these tests.
const agentUser = "system:serviceaccount:lvms:lvms-node-agent"

// certTime is the fixed time certificates are made and checked at: no test depends on the calendar.
var certTime = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// pki is a transfer CA and a clock.
type pki struct {
	ca    *transferca.CA
	clock *clocktesting.FakeClock
}

func newPKI(t testing.TB) pki {
	t.Helper()
	clk := clocktesting.NewFakeClock(certTime)
	ca, err := transferca.New(clk)
	if err != nil {
		t.Fatal(err)
	}
	return pki{ca: ca, clock: clk}
}

// identity is node's identity from this CA, trusting this CA.
func (p pki) identity(t testing.TB, node string) *blockcopy.Identity {
	t.Helper()
	return p.identityTrusting(t, node, p)
}

// identityTrusting is node's identity from this CA, trusting trust's CA: a stranger that knows whom to
// trust but has no certificate from it.
func (p pki) identityTrusting(t testing.TB, node string, trust pki) *blockcopy.Identity {
	t.Helper()
	keyPEM, csrPEM, err := blockcopy.NewKeyAndRequest(node)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := p.ca.Sign(transferca.Request{CSR: csrPEM, Username: agentUser, Extra: map[string][]string{transferca.NodeNameExtra: {node}}}, agentUser)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, err := trust.ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	id, err := blockcopy.LoadIdentity(node, keyPEM, certPEM, caPEM, p.clock)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// randomFile makes a file of size bytes of seeded random content and returns its path and SHA-256.
func randomFile(t testing.TB, dir string, size int64, seed uint64) (string, string) {
	t.Helper()
	path := filepath.Join(dir, "source.img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeRandom(t, f, size, seed)
	return path, sha256File(t, path, size)
}

// writeRandom writes size bytes of seeded random content at the start of w.
func writeRandom(t testing.TB, w io.WriterAt, size int64, seed uint64) {
	t.Helper()
	rng := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 1})
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-off)]
		_, _ = rng.Read(b)
		if _, err := w.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
}

// emptyFile makes a file of size zero bytes.
func emptyFile(t testing.TB, dir, name string, size int64) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	return path
}

// sha256File is the SHA-256 of the first size bytes of path, read independently of the package.
func sha256File(t testing.TB, path string, size int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if n, err := io.Copy(h, io.LimitReader(f, size)); err != nil || n != size {
		t.Fatalf("read %s: %d of %d bytes: %v", path, n, size, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func open(t testing.TB, path string, flag int) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func size(t testing.TB, f *os.File) int64 {
	t.Helper()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// outcome is what each side of one copy returned.
type outcome struct {
	sent, recv       blockcopy.Stats
	sendErr, recvErr error
}

// wrapFunc wraps a side's raw connection (TLS, or a corrupting proxy's end).
type wrapFunc func(net.Conn) net.Conn

func plain(c net.Conn) net.Conn { return c }

// run copies with s and r over a loopback TCP connection, each side's end wrapped; mid, when set, sits
// between the two (a proxy that may alter bytes).
func run(t testing.TB, ctx context.Context, s *blockcopy.Sender, r *blockcopy.Receiver, sendWrap, recvWrap wrapFunc, mid func(from, to net.Conn)) outcome {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	target := ln.Addr().String()
	if mid != nil {
		pln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pln.Close()
		go func() {
			from, err := pln.Accept()
			if err != nil {
				return
			}
			to, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				from.Close()
				return
			}
			go func() { _, _ = io.Copy(from, to); from.Close() }()
			mid(from, to)
			to.Close()
		}()
		target = pln.Addr().String()
	}
	var o outcome
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		c, err := ln.Accept()
		if err != nil {
			o.recvErr = err
			return
		}
		conn := recvWrap(c)
		defer conn.Close()
		o.recv, o.recvErr = r.Receive(ctx, conn)
	}()
	c, err := net.Dial("tcp", target)
	if err != nil {
		t.Fatal(err)
	}
	conn := sendWrap(c)
	o.sent, o.sendErr = s.Send(ctx, conn)
	conn.Close()
	<-recvDone
	return o
}

func tlsServer(cfg *tls.Config) wrapFunc {
	return func(c net.Conn) net.Conn { return tls.Server(c, cfg) }
}

func tlsClient(cfg *tls.Config) wrapFunc {
	return func(c net.Conn) net.Conn { return tls.Client(c, cfg) }
}
