package transfer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/operator/transferca"
)

const id = "0123456789abcdef"

// annotations plays the API server for the agents' annotations on LogicalVolumes.
type annotations struct {
	mu sync.Mutex
	m  map[string]string // "<lv>/<key>"
	n  map[string]int    // writes per LogicalVolume
}

func (a *annotations) Annotate(_ context.Context, lv, key, value string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[lv]++
	if value == "" {
		delete(a.m, lv+"/"+key)
	} else {
		a.m[lv+"/"+key] = value
	}
	return nil
}

// writes is how many annotation writes LogicalVolume lv got.
func (a *annotations) writes(lv string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[lv]
}

func (a *annotations) get(lv, key string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m[lv+"/"+key]
}

func (a *annotations) ReceiverAddress(_ context.Context, target, moveID string) (string, error) {
	v, ok := strings.CutPrefix(a.get(target, transfer.AnnotationReceiver), moveID+":")
	if !ok {
		return "", fmt.Errorf("no receiver for move %s on %s yet", moveID, target)
	}
	return v, nil
}

func identity(t *testing.T, ca *transferca.CA, clk clock.PassiveClock, node string) *blockcopy.Identity {
	t.Helper()
	key, csr, err := blockcopy.NewKeyAndRequest(node)
	if err != nil {
		t.Fatal(err)
	}
	cert, _, err := ca.Sign(transferca.Request{CSR: csr, Username: "agent", Extra: map[string][]string{transferca.NodeNameExtra: {node}}}, "agent")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, _ := ca.PEM()
	id, err := blockcopy.LoadIdentity(node, key, cert, caPEM, clk)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func file(t *testing.T, dir, name string, size int64, random bool) string {
	t.Helper()
	b := make([]byte, size)
	if random {
		_, _ = rand.NewChaCha8([32]byte{7}).Read(b)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func digest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pair is node-a's source file and node-b's target file, the agents' annotations and the CA.
type pair struct {
	t        *testing.T
	ca       *transferca.CA
	certs    clock.PassiveClock
	src, dst string
	ann      *annotations
	devs     *countingDevices
	logs     *logLines
}

func newPair(t *testing.T, src, dst string) *pair {
	certs := clocktesting.NewFakePassiveClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	ca, err := transferca.New(certs)
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{t: t, ca: ca, certs: certs, src: src, dst: dst, ann: &annotations{m: map[string]string{}}, logs: &logLines{}}
	p.devs = &countingDevices{next: transfer.FileDevices{Resolve: func(lv string) (string, error) {
		return map[string]string{"pvc-1": src, "lvms-move-1": dst}[lv], nil
	}}}
	return p
}

func (p *pair) runner(node string) *transfer.Runner {
	return &transfer.Runner{Identity: identity(p.t, p.ca, p.certs, node), Devices: p.devs, Reporter: p.ann, Addresses: p.ann,
		ListenHost: "127.0.0.1", ProgressDir: filepath.Join(filepath.Dir(p.dst), "progress"), ChunkSize: 256 << 10, IdleTimeout: time.Minute, Clock: clock.RealClock{}}
}

// receive starts r receiving into lvms-move-1 from node-a, with the pair's log, and waits for its address.
func (p *pair) receive(ctx context.Context, r *transfer.Runner) (addr string, done <-chan error) {
	p.t.Helper()
	if err := os.MkdirAll(r.ProgressDir, 0o700); err != nil {
		p.t.Fatal(err)
	}
	errc := make(chan error, 1)
	ctx = logr.NewContext(ctx, funcr.New(p.logs.add, funcr.Options{}))
	go func() {
		errc <- r.Receive(ctx, "lvms-move-1", transfer.ReceiveInstruction{SourceNode: "node-a", SourceVolume: "pvc-1", MoveID: id})
	}()
	waitFor(p.t, "the receiver's address", func() bool { return p.ann.get("lvms-move-1", transfer.AnnotationReceiver) != "" })
	addr, _ = p.ann.ReceiverAddress(ctx, "lvms-move-1", id)
	return addr, errc
}

func (p *pair) send(ctx context.Context, node string) error {
	return p.runner(node).Send(ctx, "pvc-1", transfer.SendInstruction{TargetNode: "node-b", TargetVolume: "lvms-move-1", MoveID: id})
}

// requireCopied fails unless both agents reported the source's digest, no copy error stayed on the
// target and the target hashes like the source.
func (p *pair) requireCopied() {
	p.t.Helper()
	want := id + ":" + digest(p.t, p.src)
	if got := p.ann.get("pvc-1", move.AnnotationSHA256); got != want {
		p.t.Errorf("source report %q, want %q", got, want)
	}
	if got := p.ann.get("lvms-move-1", move.AnnotationSHA256); got != want {
		p.t.Errorf("target report %q, want %q", got, want)
	}
	if e := p.ann.get("lvms-move-1", move.AnnotationCopyError); e != "" {
		p.t.Errorf("a copy error stayed on the target after the copy succeeded: %s", e)
	}
	if digest(p.t, p.dst) != digest(p.t, p.src) {
		p.t.Fatal("the target differs from the source")
	}
}

// logLines collects a logger's lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, args)
}

// matching returns the lines that contain s.
func (l *logLines) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// countingDevices counts the bytes written to the devices it opens.
type countingDevices struct {
	next    transfer.Devices
	written atomic.Int64
}

func (c *countingDevices) Open(lv string, write bool) (transfer.Device, int64, error) {
	d, size, err := c.next.Open(lv, write)
	if err != nil {
		return nil, 0, err
	}
	return countingDevice{Device: d, n: &c.written}, size, nil
}

type countingDevice struct {
	transfer.Device
	n *atomic.Int64
}

func (d countingDevice) WriteAt(p []byte, off int64) (int, error) {
	n, err := d.Device.WriteAt(p, off)
	d.n.Add(int64(n))
	return n, err
}

// Discard passes a discard on when the device can.
func (d countingDevice) Discard(off, length int64) error {
	if dd, ok := d.Device.(transfer.Discarder); ok {
		return dd.Discard(off, length)
	}
	return errors.ErrUnsupported
}

func TestRunner_SourceAgentSendsTargetAgentReceives_BothReportTheSameDigest(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, file(t, dir, "src", 3<<20, true), file(t, dir, "dst", 3<<20, false))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, recvErr := p.receive(ctx, p.runner("node-b"))

	// An agent of another node is refused and logged; the receiver keeps waiting for node-a.
	before := p.ann.writes("lvms-move-1")
	if err := p.send(ctx, "node-c"); err == nil {
		t.Fatal("node-c's agent sent node-a's move")
	}
	waitFor(t, "the refusal of node-c in the log", func() bool {
		return len(p.logs.matching(`its certificate is for node \"node-c\", expected node \"node-a\"`)) == 1
	})
	if n := p.ann.writes("lvms-move-1") - before; n != 0 {
		t.Errorf("the refused handshake wrote the target LogicalVolume %d times, want 0", n)
	}

	if err := p.send(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
	p.requireCopied()
	if got := p.ann.get("lvms-move-1", move.AnnotationProgress); got != "12/12" {
		t.Errorf("progress annotation %q, want 12/12 (3 MiB in 256 KiB chunks)", got)
	}
}

// farFuture is a clock whose deadlines never come in a test: a connection waits until the test closes it.
var farFuture = clocktesting.NewFakeClock(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC))

// garbage connects, sends bytes that are no TLS handshake, and waits until the receiver closes the
// connection, so that the receiver is done with it.
func garbage(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	_ = c.SetReadDeadline(time.Now().Add(time.Minute)) // a guard, not a measurement: a test that hangs fails
	// EOF, or a reset when the receiver closed it with the garbage unread: closed either way.
	if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the receiver did not close a connection that sent garbage: %v", err)
	}
}

// silent connects and sends nothing.
func silent(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRunner_SilentAndGarbageConnections_NeitherBlockTheCopyNorWriteTheAPI(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, file(t, dir, "src", 3<<20, true), file(t, dir, "dst", 3<<20, false))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := p.runner("node-b")
	r.Clock = farFuture // no handshake times out: the silent connection stays for the whole copy
	addr, recvErr := p.receive(ctx, r)
	before := p.ann.writes("lvms-move-1")

	silent(t, addr)
	for range 20 {
		garbage(t, addr)
	}
	if n := p.ann.writes("lvms-move-1") - before; n != 0 {
		t.Errorf("20 connections that failed their handshake wrote the target LogicalVolume %d times, want 0", n)
	}
	if got := p.logs.matching("Refused a connection"); len(got) == 0 || len(got) > 5 {
		t.Errorf("20 failed handshakes were logged in %d lines, want a few (rate-limited):\n%s", len(got), strings.Join(got, "\n"))
	}
	farFuture.Step(time.Hour)
	garbage(t, addr)
	// Each garbage connection returns once the receiver closed it, after logging or counting it: 3 of the 20
	// were logged (the burst), 17 not.
	if got := p.logs.matching("Refused a connection"); !strings.Contains(got[len(got)-1], `"notLogged"=17`) {
		t.Errorf("the first line logged after the quiet hour does not say that 17 refusals were not logged: %s", got[len(got)-1])
	}
	farFuture.Step(time.Hour)
	garbage(t, addr)
	if got := p.logs.matching("Refused a connection"); strings.Contains(got[len(got)-1], `"notLogged"`) {
		t.Errorf("a refusal after one that was logged says some were not logged: %s", got[len(got)-1])
	}

	if err := p.send(ctx, "node-a"); err != nil {
		t.Fatalf("the copy with a silent connection open: %v", err)
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
	p.requireCopied()
}

func TestRunner_ConnectionsBeyondTheLimit_AreClosedAtOnce(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, file(t, dir, "src", 1<<20, true), file(t, dir, "dst", 1<<20, false))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := p.runner("node-b")
	r.Clock, r.MaxConnections = farFuture, 3
	addr, recvErr := p.receive(ctx, r)

	held := []net.Conn{silent(t, addr), silent(t, addr), silent(t, addr)}
	// The fourth is closed at once, not after a handshake timeout (none comes on this clock).
	garbage(t, addr)
	waitFor(t, "the refusal in the log", func() bool { return len(p.logs.matching("serves 3 at a time")) == 1 })
	// While the three wait, a sender is closed at once too; once they are gone, the copy goes through.
	if err := p.send(ctx, "node-a"); err == nil {
		t.Fatal("a fourth connection was served while three were open")
	}
	for _, c := range held {
		c.Close()
	}
	var err error
	for range 100 { // the receiver sees the three closed soon, not at once
		if err = p.send(ctx, "node-a"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the copy after the connections closed: %v", err)
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
	p.requireCopied()
}

func TestRunner_CopyErrorAfterAuthentication_IsReportedAndTheNextAttemptResumesAndVerifies(t *testing.T) {
	dir := t.TempDir()
	const size = 8 << 20
	p := newPair(t, file(t, dir, "src", size, true), file(t, dir, "dst", size, false))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := p.runner("node-b")
	r.SyncEvery = 1 << 20
	_, recvErr := p.receive(ctx, r)

	// The sender's agent stops half-way (its attempt is cancelled).
	sendCtx, stop := context.WithCancel(ctx)
	s := p.runner("node-a")
	s.Devices = cancelAfter{Devices: p.devs, at: size / 2, cancel: stop}
	if err := s.Send(sendCtx, "pvc-1", transfer.SendInstruction{TargetNode: "node-b", TargetVolume: "lvms-move-1", MoveID: id}); err == nil {
		t.Fatal("the cancelled attempt succeeded")
	}
	waitFor(t, "the failed attempt's report on the target", func() bool {
		return strings.Contains(p.ann.get("lvms-move-1", move.AnnotationCopyError), "the peer closed the connection")
	}, func() string { return "the target's copy error: " + p.ann.get("lvms-move-1", move.AnnotationCopyError) })
	first := p.devs.written.Load()
	if first == 0 || first >= size {
		t.Fatalf("the cancelled attempt wrote %d bytes, want some but not all of %d", first, size)
	}

	if err := p.send(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
	p.requireCopied()
	if again := p.devs.written.Load() - first; again >= size {
		t.Errorf("the second attempt wrote %d bytes, want less than the volume (it resumes)", again)
	}
}

// cancelAfter cancels a copy once the source is read at or beyond at.
type cancelAfter struct {
	transfer.Devices
	at     int64
	cancel func()
}

func (d cancelAfter) Open(lv string, write bool) (transfer.Device, int64, error) {
	dev, size, err := d.Devices.Open(lv, write)
	if err != nil {
		return nil, 0, err
	}
	return cancelAtDevice{Device: dev, at: d.at, cancel: d.cancel}, size, nil
}

type cancelAtDevice struct {
	transfer.Device
	at     int64
	cancel func()
}

func (c cancelAtDevice) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.at {
		c.cancel()
	}
	return c.Device.ReadAt(p, off)
}

// fakePools says lvms-move-1 is thin in vg0/pool0 (thresholds 90% data, 75% metadata) and answers its
// usage from a script: the n-th question gets data[n] (the last one from then on).
type fakePools struct {
	mu    sync.Mutex
	data  []float64
	calls int
}

func (f *fakePools) ThinPool(_ context.Context, lv string) (*transfer.ThinPool, error) {
	if lv != "lvms-move-1" {
		return nil, nil
	}
	return &transfer.ThinPool{VolumeGroup: "vg0", Name: "pool0", DataThreshold: 90, MetadataThreshold: 75}, nil
}

func (f *fakePools) Usage(_ context.Context, pool transfer.ThinPool) (float64, float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.data[min(f.calls, len(f.data)-1)]
	f.calls++
	return d, 10, nil
}

func (f *fakePools) asked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// sparse makes a file of size bytes, a hole but for 256 KiB of random data at each offset in data.
func sparse(t *testing.T, dir, name string, size int64, data ...int64) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{9})
	for _, off := range data {
		b := make([]byte, 256<<10)
		_, _ = rng.Read(b)
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestRunner_ThinTarget_OnlyTheSourcesDataIsWrittenAndStaleDataIsZeroed(t *testing.T) {
	dir := t.TempDir()
	const size = 16 << 20
	src := sparse(t, dir, "src", size, 0, 5<<20, size-256<<10)
	dst := sparse(t, dir, "dst", size, 8<<20) // stale data where the source is zero
	p := newPair(t, src, dst)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := p.runner("node-b")
	pools := &fakePools{data: []float64{20}}
	r.Pools, r.PoolCheckEvery = pools, 512<<10
	_, recvErr := p.receive(ctx, r)
	if err := p.send(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
	p.requireCopied() // the stale data is gone: the target hashes like the source
	if got := p.devs.written.Load(); got != 3*256<<10 {
		t.Errorf("%d bytes were written to the thin target, want only the source's 3 chunks of data (%d bytes)", got, 3*256<<10)
	}
	if got := allocated(t, dst); got > 3*256<<10+64<<10 {
		t.Errorf("the thin target has %d bytes allocated, want about the source's data (%d bytes)", got, 3*256<<10)
	}
	if got := pools.asked(); got != 2 {
		t.Errorf("the pool's usage was read %d times, want 2 (at the start, and once 512 KiB were written)", got)
	}
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

func TestRunner_ThinPoolFillsUp_TheCopyStopsWithTheReasonAndResumesOnceThereIsRoom(t *testing.T) {
	dir := t.TempDir()
	const size = 4 << 20
	p := newPair(t, file(t, dir, "src", size, true), file(t, dir, "dst", size, false))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := p.runner("node-b")
	pools := &fakePools{data: []float64{50, 89.9, 90}} // at the threshold is past it
	r.Pools, r.PoolCheckEvery = pools, 1<<20
	_, recvErr := p.receive(ctx, r)

	if err := p.send(ctx, "node-a"); err == nil {
		t.Fatal("the copy went on into a pool past its threshold")
	}
	const want = "the target's thin pool vg0/pool0 is 90.0% full, at or past the device class's data usage threshold of 90%"
	waitFor(t, "the pool's report on the target", func() bool {
		return strings.Contains(p.ann.get("lvms-move-1", move.AnnotationCopyError), want)
	})
	if got := p.devs.written.Load(); got != 2<<20 {
		t.Errorf("%d bytes were written before the copy stopped, want 2 MiB (the third check failed)", got)
	}
	// The next attempt is refused at once, and the sender says why.
	err := p.send(ctx, "node-a")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a new attempt while the pool is full: %v, want %q", err, want)
	}

	pools.mu.Lock()
	pools.data = []float64{40} // the pool was extended
	pools.mu.Unlock()
	// The refused attempt's session may still be ending on the receiver, which then refuses this one as a
	// second copy in progress: the sender tries again, as the runner's backoff does.
	for range 100 {
		if err = p.send(ctx, "node-a"); err == nil || !strings.Contains(err.Error(), "another copy into this target is in progress") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
	p.requireCopied()
	if got := p.devs.written.Load(); got != size {
		t.Errorf("%d bytes were written in all, want the volume's %d once (the copy resumed where it stopped)", got, size)
	}
}

// waitFor polls cond for 30 s; a failure says what was awaited and, from seen, what there was instead.
func waitFor(t *testing.T, what string, cond func() bool, seen ...func() string) {
	t.Helper()
	for range 3000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	var got []string
	for _, s := range seen {
		got = append(got, s())
	}
	t.Fatalf("never saw %s %s", what, strings.Join(got, "; "))
}

func TestParseInstructions_RefuseMalformedInput(t *testing.T) {
	good, err := transfer.ParseSendTo("node-b/lvms-move-" + id + "/" + id)
	if err != nil || good.TargetNode != "node-b" || good.MoveID != id {
		t.Fatalf("%+v %v", good, err)
	}
	for _, v := range []string{"", "a/b", "a/b/c/d", "node-b/lv/NOTHEX0123456789", "../x/lv/" + id, "node-b//" + id, "Node_B/lv/" + id} {
		if _, err := transfer.ParseSendTo(v); err == nil {
			t.Errorf("ParseSendTo(%q) accepted", v)
		}
	}
	if _, err := transfer.ParseReceiveFrom("node-a/pvc-1", id); err != nil {
		t.Error(err)
	}
	for _, v := range []string{"node-a", "node-a/pvc/1", "/pvc-1", "node-a/"} {
		if _, err := transfer.ParseReceiveFrom(v, id); err == nil {
			t.Errorf("ParseReceiveFrom(%q) accepted", v)
		}
	}
	// Not two parts: the message says what the shape is, not that a part is a bad name.
	for _, v := range []string{"node-a", "node-a/pvc/1"} {
		if _, err := transfer.ParseReceiveFrom(v, id); err == nil || !strings.Contains(err.Error(), "is not <node>/<logicalvolume>") {
			t.Errorf("ParseReceiveFrom(%q): %v; want it to name the shape <node>/<logicalvolume>", v, err)
		}
	}
	if _, err := transfer.ParseReceiveFrom("node-a/pvc-1", "1"); err == nil {
		t.Error("a short move ID was accepted")
	}
}

// downReporter plays an API server that refuses every write.
type downReporter struct{}

func (downReporter) Annotate(_ context.Context, lv, key, _ string) error {
	return fmt.Errorf("annotate %s with %s: the API server is unreachable", lv, key)
}

// TestRunner_AFailureThatCannotBeReportedSaysSo: when the copy error cannot be written to the LogicalVolume,
// Send's error carries both the failure and why it is not on the LogicalVolume (the agent logs it; nothing is
// silently dropped).
func TestRunner_AFailureThatCannotBeReportedSaysSo(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, file(t, dir, "src", 1<<20, true), file(t, dir, "dst", 1<<20, false))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens there: the dial is refused
	r := p.runner("node-a")
	r.Reporter, r.Addresses = downReporter{}, fixedAddress(closed)
	err = r.Send(t.Context(), "pvc-1", transfer.SendInstruction{TargetNode: "node-b", TargetVolume: "lvms-move-1", MoveID: id})
	if err == nil || !strings.Contains(err.Error(), "reach the receiver on node node-b at "+closed) ||
		!strings.Contains(err.Error(), "annotate pvc-1 with "+move.AnnotationCopyError+": the API server is unreachable") {
		t.Errorf("a failed send whose report failed: %v; want both errors", err)
	}
}
