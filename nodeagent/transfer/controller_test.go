package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/operator/transferca"
)

// The control plane is started by the first test that needs one (the VM test's guests never do).
var (
	envOnce   sync.Once
	sharedEnv *testenv.Env
	envErr    error
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	if sharedEnv != nil {
		_ = sharedEnv.Stop()
	}
	os.Exit(code)
}

func controlPlane(t *testing.T) *testenv.Env {
	t.Helper()
	testenv.Require(t)
	envOnce.Do(func() { sharedEnv, envErr = testenv.Start() })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return sharedEnv
}

const (
	id2 = "fedcba9876543210"
	id3 = "0f1e2d3c4b5a6978"
)

// cluster is one test's control plane, transfer CA and nodes (named after a fresh namespace, so that
// tests sharing the control plane never see each other's LogicalVolumes).
type cluster struct {
	t     *testing.T
	env   *testenv.Env
	ca    *transferca.CA
	clk   *clocktesting.FakeClock // the certificates' clock and the controllers' timers
	nodeA string
	nodeB string
	nodeC string // no agent runs there
	logs  *logBuffer
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	env := controlPlane(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	ca, err := transferca.New(clk)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	c := &cluster{t: t, env: env, ca: ca, clk: clk, nodeA: ns + "-a", nodeB: ns + "-b", nodeC: ns + "-c", logs: &logBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agents' logs:\n%s", c.logs.String())
		}
		list := &topolvmv1.LogicalVolumeList{}
		_ = env.Client.List(context.Background(), list)
		for i := range list.Items {
			if strings.HasPrefix(list.Items[i].Spec.NodeName, ns) {
				_ = env.Client.Delete(context.Background(), &list.Items[i])
			}
		}
	})
	return c
}

// issuer plays transfercert.Requester: it signs the node's certificate with the test CA, and counts.
type issuer struct {
	ca    *transferca.CA
	clk   clock.PassiveClock
	node  string
	calls atomic.Int32
}

func (i *issuer) Identity(context.Context) (*blockcopy.Identity, error) {
	i.calls.Add(1)
	key, csr, err := blockcopy.NewKeyAndRequest(i.node)
	if err != nil {
		return nil, err
	}
	cert, _, err := i.ca.Sign(transferca.Request{CSR: csr, Username: "agent", Extra: map[string][]string{transferca.NodeNameExtra: {i.node}}}, "agent")
	if err != nil {
		return nil, err
	}
	caPEM, _, _ := i.ca.PEM()
	return blockcopy.LoadIdentity(i.node, key, cert, caPEM, i.clk)
}

// agent is one node's transfer controller in its own manager, as in the node's agent.
type agent struct {
	node    string
	devDir  string // the node's /dev: <vg0>/<volume ID> files
	issuer  *issuer
	devices transfer.Devices
}

// startAgent runs node's controller with devices (nil: its LogicalVolumes' files under devDir/vg0).
func (c *cluster) startAgent(node string, devices transfer.Devices) *agent {
	t := c.t
	t.Helper()
	a := &agent{node: node, devDir: t.TempDir(), issuer: &issuer{ca: c.ca, clk: c.clk, node: node}, devices: devices}
	if err := os.Mkdir(filepath.Join(a.devDir, "vg0"), 0o755); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(c.env.Config, ctrl.Options{Scheme: c.env.Scheme, Logger: logr.Discard(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	logs := c.logs
	logger := funcr.New(func(prefix, args string) {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		logs.b.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 1})
	ctl := transfer.NewController(transfer.ControllerOptions{NodeName: node, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Identity: a.issuer, Devices: devices, DeviceDir: a.devDir,
		VolumeGroup: func(dc string) (string, bool, error) {
			if dc != "ssd" {
				return "", false, os.ErrNotExist
			}
			return "vg0", false, nil
		},
		ListenHost: "127.0.0.1", ProgressDir: t.TempDir(), ChunkSize: 64 << 10, IdleTimeout: time.Minute,
		Clock: clock.RealClock{}, Timers: c.clk, Logger: logger.WithName(node)})
	if err := ctl.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent of %s: %v", node, err)
		}
	})
	return a
}

// volume creates a LogicalVolume of class ssd on node with status.volumeID (when not "").
func (c *cluster) volume(name, node, volumeID string) {
	c.t.Helper()
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: topolvmv1.LogicalVolumeSpec{Name: name, NodeName: node, Size: resource.MustParse("1Gi"), DeviceClass: "ssd"}}
	if err := c.env.Client.Create(context.Background(), lv); err != nil {
		c.t.Fatal(err)
	}
	if volumeID != "" {
		c.setVolumeID(name, volumeID)
	}
}

func (c *cluster) setVolumeID(name, volumeID string) {
	c.t.Helper()
	lv := c.lv(name)
	lv.Status.VolumeID = volumeID
	if err := c.env.Client.Status().Update(context.Background(), lv); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) lv(name string) *topolvmv1.LogicalVolume {
	c.t.Helper()
	lv := &topolvmv1.LogicalVolume{}
	if err := c.env.Client.Get(context.Background(), types.NamespacedName{Name: name}, lv); err != nil {
		c.t.Fatal(err)
	}
	return lv
}

func (c *cluster) annotation(name, key string) string { return c.lv(name).Annotations[key] }

// annotate merges annotations into a LogicalVolume as the operator does; "" removes one.
func (c *cluster) annotate(name string, kv ...string) {
	c.t.Helper()
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			m[kv[i]] = nil
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": m}})
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.env.Client.Patch(context.Background(), lv, client.RawPatch(types.MergePatchType, patch)); err != nil {
		c.t.Fatal(err)
	}
}

// startMove writes the operator's instructions for moving src (on node a) to dst (on node b).
func (c *cluster) startMove(src, dst, moveID string) {
	c.t.Helper()
	c.annotate(src, move.AnnotationSendTo, c.nodeB+"/"+dst+"/"+moveID)
	c.annotate(dst, move.AnnotationReceiveFrom, c.nodeA+"/"+src, move.AnnotationID, moveID)
}

// stopMove removes them as the operator's stopAgents does.
func (c *cluster) stopMove(src, dst string) {
	c.t.Helper()
	c.annotate(src, move.AnnotationSendTo, "")
	c.annotate(dst, move.AnnotationReceiveFrom, "")
}

// waitCopied waits for both agents' SHA-256 of move moveID and checks they are the source file's.
func (c *cluster) waitCopied(src, dst, moveID, srcFile, dstFile string) {
	c.t.Helper()
	want := moveID + ":" + digest(c.t, srcFile)
	waitFor(c.t, "both agents' SHA-256 of move "+moveID, func() bool {
		return c.annotation(src, move.AnnotationSHA256) == want && c.annotation(dst, move.AnnotationSHA256) == want
	})
	if digest(c.t, dstFile) != digest(c.t, srcFile) {
		c.t.Fatal("the target volume's bytes differ from the source's")
	}
	for _, lv := range []string{src, dst} {
		if e := c.annotation(lv, move.AnnotationCopyError); e != "" {
			c.t.Errorf("LogicalVolume %s still shows a copy error after the copy: %s", lv, e)
		}
	}
}

// TestController_MovesAVolumeFromNodeAToNodeB: the operator's instructions on the two LogicalVolumes are
// enough: node-b's agent publishes its receiver, node-a's agent (instructed first, so it waits for it)
// sends, both report the SHA-256 of the source, the target's bytes are the source's, and every step is
// logged with the move ID.
func TestController_MovesAVolumeFromNodeAToNodeB(t *testing.T) {
	c := newCluster(t)
	a := c.startAgent(c.nodeA, nil)
	b := c.startAgent(c.nodeB, nil)
	srcFile := file(t, filepath.Join(a.devDir, "vg0"), "vol-src", 3<<20, true)
	dstFile := file(t, filepath.Join(b.devDir, "vg0"), "vol-dst", 3<<20, false)
	src, dst := c.nodeA+"-pvc", c.nodeB+"-target"
	c.volume(src, c.nodeA, "vol-src")
	c.volume(dst, c.nodeB, "vol-dst")

	c.annotate(src, move.AnnotationSendTo, c.nodeB+"/"+dst+"/"+id)
	c.annotate(dst, move.AnnotationReceiveFrom, c.nodeA+"/"+src, move.AnnotationID, id)
	c.waitCopied(src, dst, id, srcFile, dstFile)

	if got := c.annotation(dst, move.AnnotationProgress); got != "48/48" {
		t.Errorf("target progress %q, want 48/48 (3 MiB in 64 KiB chunks)", got)
	}
	if addr := c.annotation(dst, transfer.AnnotationReceiver); !strings.HasPrefix(addr, id+":127.0.0.1:") {
		t.Errorf("receiver address %q, want %s:127.0.0.1:<port>", addr, id)
	}
	for _, ag := range []*agent{a, b} {
		if n := ag.issuer.calls.Load(); n != 1 {
			t.Errorf("node %s asked for its transfer certificate %d times, want once", ag.node, n)
		}
	}
	logs := c.logs.String()
	for _, msg := range []string{"Starting the move", "Copied; the SHA-256 is reported"} {
		for _, role := range []string{"send", "receive"} {
			if !slices.ContainsFunc(strings.Split(logs, "\n"), func(l string) bool {
				return strings.Contains(l, msg) && strings.Contains(l, `"moveID"="`+id+`"`) && strings.Contains(l, `"role"="`+role+`"`)
			}) {
				t.Errorf("no %q log line of the %s side with the move ID:\n%s", msg, role, logs)
			}
		}
	}
	// The operator stops the agents once both reported: nothing is run again, nothing is reported.
	c.stopMove(src, dst)
	waitFor(t, "the instructions gone", func() bool { return c.annotation(dst, move.AnnotationReceiveFrom) == "" })
}

// gatedDevices lets reads below from through and blocks the others until gate is closed.
type gatedDevices struct {
	inner       transfer.Devices
	from        int64
	gate        chan struct{}
	blocked     chan struct{}
	blockedOnce sync.Once
	opens       atomic.Int32
	closes      atomic.Int32
}

func (g *gatedDevices) Open(lv string, write bool) (transfer.Device, int64, error) {
	d, size, err := g.inner.Open(lv, write)
	if err != nil {
		return nil, 0, err
	}
	g.opens.Add(1)
	return &gatedDevice{Device: d, g: g}, size, nil
}

type gatedDevice struct {
	transfer.Device
	g *gatedDevices
}

func (d *gatedDevice) ReadAt(p []byte, off int64) (int, error) {
	if off >= d.g.from {
		d.g.blockedOnce.Do(func() { close(d.g.blocked) })
		<-d.g.gate
	}
	return d.Device.ReadAt(p, off)
}

func (d *gatedDevice) Close() error {
	d.g.closes.Add(1)
	return d.Device.Close()
}

// TestController_RemovingTheInstructionsCancelsTheCopy: the operator removes a move's instructions while
// the source's reads are stuck half-way: the receiver stops listening at once, the sender gives up as soon
// as its read returns and is not tried again, nobody reports a SHA-256, and a new move of the same volumes
// (a new move ID) then copies everything.
func TestController_RemovingTheInstructionsCancelsTheCopy(t *testing.T) {
	c := newCluster(t)
	gated := &gatedDevices{from: 1 << 20, gate: make(chan struct{}), blocked: make(chan struct{})}
	var a *agent
	gated.inner = transfer.FileDevices{Resolve: func(lv string) (string, error) {
		return filepath.Join(a.devDir, "vg0", "vol-src"), nil
	}}
	a = c.startAgent(c.nodeA, gated)
	var openGate sync.Once
	t.Cleanup(func() { openGate.Do(func() { close(gated.gate) }) }) // before the agents stop
	b := c.startAgent(c.nodeB, nil)
	srcFile := file(t, filepath.Join(a.devDir, "vg0"), "vol-src", 4<<20, true)
	dstFile := file(t, filepath.Join(b.devDir, "vg0"), "vol-dst", 4<<20, false)
	src, dst := c.nodeA+"-pvc", c.nodeB+"-target"
	c.volume(src, c.nodeA, "vol-src")
	c.volume(dst, c.nodeB, "vol-dst")

	c.startMove(src, dst, id)
	select {
	case <-gated.blocked:
	case <-time.After(30 * time.Second):
		t.Fatalf("the copy never reached 1 MiB\n%s", c.logs.String())
	}
	addr, _ := strings.CutPrefix(c.annotation(dst, transfer.AnnotationReceiver), id+":")
	c.stopMove(src, dst)

	waitFor(t, "the receiver to stop listening", func() bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		conn.Close()
		return false
	})
	openGate.Do(func() { close(gated.gate) })
	waitFor(t, "the sender to close the source volume", func() bool { return gated.opens.Load() == gated.closes.Load() })
	waitFor(t, "no attempt waiting to be retried", func() bool { return !c.clk.HasWaiters() })
	for _, lv := range []string{src, dst} {
		if s := c.annotation(lv, move.AnnotationSHA256); s != "" {
			t.Errorf("LogicalVolume %s reports SHA-256 %s of a cancelled copy", lv, s)
		}
	}
	if digest(t, dstFile) == digest(t, srcFile) {
		t.Fatal("the cancelled copy completed")
	}

	c.startMove(src, dst, id2)
	c.waitCopied(src, dst, id2, srcFile, dstFile)
	if n := gated.opens.Load(); n != 2 {
		t.Errorf("the source was opened %d times, want 2 (one per move)", n)
	}
	for _, ag := range []*agent{a, b} {
		if n := ag.issuer.calls.Load(); n != 1 {
			t.Errorf("node %s asked for its transfer certificate %d times over two moves, want once", ag.node, n)
		}
	}
}

// recordingDevices opens the files of a fixed map and records which LogicalVolumes were opened.
type recordingDevices struct {
	files  map[string]string
	mu     sync.Mutex
	opened []string
}

func (r *recordingDevices) Open(lv string, write bool) (transfer.Device, int64, error) {
	r.mu.Lock()
	r.opened = append(r.opened, lv)
	r.mu.Unlock()
	return transfer.FileDevices{Resolve: func(lv string) (string, error) { return r.files[lv], nil }}.Open(lv, write)
}

// TestController_IgnoresLogicalVolumesOfOtherNodes: instructions on node-c's LogicalVolumes (where no
// agent runs) are not acted on by node-a's or node-b's agent, even where they name them; the agents'
// reporter and device paths refuse another node's LogicalVolume outright.
func TestController_IgnoresLogicalVolumesOfOtherNodes(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	srcFile := file(t, dir, "src", 1<<20, true)
	dstFile := file(t, dir, "dst", 1<<20, false)
	otherFile := file(t, dir, "other", 1<<20, true)
	src, dst, otherSrc, otherDst := c.nodeA+"-pvc", c.nodeB+"-target", c.nodeC+"-pvc", c.nodeC+"-target"
	files := map[string]string{src: srcFile, dst: dstFile, otherSrc: otherFile, otherDst: otherFile}
	devA, devB := &recordingDevices{files: files}, &recordingDevices{files: files}
	c.startAgent(c.nodeA, devA)
	c.startAgent(c.nodeB, devB)
	c.volume(otherSrc, c.nodeC, "vol-other-src")
	c.volume(otherDst, c.nodeC, "vol-other-dst")
	// Node-c's volumes claim to send to node-b's target and to receive from node-a's source.
	c.annotate(otherSrc, move.AnnotationSendTo, c.nodeB+"/"+dst+"/"+id)
	c.annotate(otherDst, move.AnnotationReceiveFrom, c.nodeA+"/"+src, move.AnnotationID, id)

	// A real move afterwards: once it is done, the agents have seen node-c's volumes long before.
	c.volume(src, c.nodeA, "vol-src")
	c.volume(dst, c.nodeB, "vol-dst")
	c.startMove(src, dst, id2)
	c.waitCopied(src, dst, id2, srcFile, dstFile)

	for _, d := range []*recordingDevices{devA, devB} {
		d.mu.Lock()
		if slices.Contains(d.opened, otherSrc) || slices.Contains(d.opened, otherDst) {
			t.Errorf("an agent opened a volume of node-c: %v", d.opened)
		}
		d.mu.Unlock()
	}
	for _, lv := range []string{otherSrc, otherDst} {
		for _, k := range []string{transfer.AnnotationReceiver, move.AnnotationCopyError, move.AnnotationSHA256, move.AnnotationProgress} {
			if v := c.annotation(lv, k); v != "" {
				t.Errorf("node-c's LogicalVolume %s got %s=%q from an agent", lv, k, v)
			}
		}
	}

	reporter := transfer.APIReporter{Client: c.env.Client, NodeName: c.nodeA}
	if err := reporter.Annotate(t.Context(), otherSrc, move.AnnotationCopyError, id+":x"); err == nil || !strings.Contains(err.Error(), "acts for node") {
		t.Errorf("node-a's reporter annotated node-c's LogicalVolume: %v", err)
	}
	paths := transfer.LogicalVolumePaths{Reader: c.env.Client, NodeName: c.nodeA, VolumeGroup: func(string) (string, bool, error) { return "vg0", false, nil }}
	if _, err := paths.Resolve(otherSrc); err == nil || !strings.Contains(err.Error(), "acts for node") {
		t.Errorf("node-a resolved node-c's LogicalVolume to a device: %v", err)
	}
	if p, err := paths.Resolve(src); err != nil || p != "/dev/vg0/vol-src" {
		t.Errorf("node-a's own LogicalVolume resolves to %q, %v; want /dev/vg0/vol-src", p, err)
	}
	// A volume ID or volume group name that would lead out of /dev/<vg>/ (anyone who can write a
	// LogicalVolume's status, or a device class, could set one) resolves to nothing.
	for i, bad := range []string{".", "..", "a/b"} {
		lv := fmt.Sprintf("%s-bad-%d", c.nodeA, i)
		c.volume(lv, c.nodeA, bad)
		if p, err := paths.Resolve(lv); err == nil || !strings.Contains(err.Error(), "is not a volume group or logical volume name") {
			t.Errorf("volume ID %q resolved to %q, %v; want it refused", bad, p, err)
		}
		badVG := transfer.LogicalVolumePaths{Reader: c.env.Client, NodeName: c.nodeA, VolumeGroup: func(string) (string, bool, error) { return bad, false, nil }}
		if p, err := badVG.Resolve(src); err == nil || !strings.Contains(err.Error(), "is not a volume group or logical volume name") {
			t.Errorf("volume group %q resolved to %q, %v; want it refused", bad, p, err)
		}
	}
}

// TestController_MalformedInstructionIsReported: a malformed send-to or receive-from is reported on its
// LogicalVolume as a copy error naming the problem, and the agent goes on with a corrected one.
func TestController_MalformedInstructionIsReported(t *testing.T) {
	c := newCluster(t)
	a := c.startAgent(c.nodeA, nil)
	file(t, filepath.Join(a.devDir, "vg0"), "vol-dst", 1<<20, false)
	src, dst := c.nodeA+"-pvc", c.nodeA+"-target"
	c.volume(src, c.nodeA, "vol-src")
	c.volume(dst, c.nodeA, "vol-dst")

	c.annotate(src, move.AnnotationSendTo, c.nodeB+"/"+dst)
	waitFor(t, "the refused send-to", func() bool {
		return strings.Contains(c.annotation(src, move.AnnotationCopyError), `is not <node>/<logicalvolume>/<move ID>`)
	})
	c.annotate(dst, move.AnnotationReceiveFrom, c.nodeB+"/"+src, move.AnnotationID, "xyz")
	waitFor(t, "the refused move ID", func() bool {
		return strings.Contains(c.annotation(dst, move.AnnotationCopyError), `move ID "xyz" is not 16 hexadecimal digits`)
	})

	// Corrected, the receive goes ahead: the agent publishes its address.
	c.annotate(dst, move.AnnotationID, id)
	waitFor(t, "the receiver's address", func() bool {
		return strings.HasPrefix(c.annotation(dst, transfer.AnnotationReceiver), id+":127.0.0.1:")
	})
}

// TestController_FailedSendIsRetriedWithBackoff: a send that fails (the source has no volume ID yet) is
// reported and tried again after the backoff, on the agent's clock; then the copy completes and the
// error is cleared.
func TestController_FailedSendIsRetriedWithBackoff(t *testing.T) {
	c := newCluster(t)
	a := c.startAgent(c.nodeA, nil)
	b := c.startAgent(c.nodeB, nil)
	srcFile := file(t, filepath.Join(a.devDir, "vg0"), "vol-src", 1<<20, true)
	dstFile := file(t, filepath.Join(b.devDir, "vg0"), "vol-dst", 1<<20, false)
	src, dst := c.nodeA+"-pvc", c.nodeB+"-target"
	c.volume(src, c.nodeA, "")
	c.volume(dst, c.nodeB, "vol-dst")

	c.startMove(src, dst, id)
	waitFor(t, "the failed send's report", func() bool {
		return strings.Contains(c.annotation(src, move.AnnotationCopyError), "has no volume ID yet")
	})
	waitFor(t, "the retry's timer", c.clk.HasWaiters)
	if s := c.annotation(dst, move.AnnotationSHA256); s != "" {
		t.Fatalf("the target reports %s before the source could be read", s)
	}
	c.setVolumeID(src, "vol-src")
	c.clk.Step(transfer.DefaultBackoff.Cap) // past any backoff
	c.waitCopied(src, dst, id, srcFile, dstFile)
}

// TestController_RenewsTheCertificateBeforeItExpires: the node's certificate is asked for once, kept for
// the next moves, and asked for again once less than a third of its lifetime (24 h) is left.
func TestController_RenewsTheCertificateBeforeItExpires(t *testing.T) {
	c := newCluster(t)
	a := c.startAgent(c.nodeA, nil)
	b := c.startAgent(c.nodeB, nil)
	srcFile := file(t, filepath.Join(a.devDir, "vg0"), "vol-src", 1<<20, true)
	dstFile := file(t, filepath.Join(b.devDir, "vg0"), "vol-dst", 1<<20, false)
	src, dst := c.nodeA+"-pvc", c.nodeB+"-target"
	c.volume(src, c.nodeA, "vol-src")
	c.volume(dst, c.nodeB, "vol-dst")

	calls := func(want int32, when string) {
		t.Helper()
		for _, ag := range []*agent{a, b} {
			if n := ag.issuer.calls.Load(); n != want {
				t.Errorf("node %s asked for its transfer certificate %d times %s, want %d", ag.node, n, when, want)
			}
		}
	}
	c.startMove(src, dst, id)
	c.waitCopied(src, dst, id, srcFile, dstFile)
	c.stopMove(src, dst)
	c.clk.Step(5 * time.Hour) // 19 h of 24 left: the certificate is renewed after two thirds, 16 h
	c.startMove(src, dst, id3)
	c.waitCopied(src, dst, id3, srcFile, dstFile)
	c.stopMove(src, dst)
	calls(1, "by a move 5 h after the first (not yet due)")
	c.clk.Step(12 * time.Hour) // 7 h of 24 left
	c.startMove(src, dst, id2)
	c.waitCopied(src, dst, id2, srcFile, dstFile)
	calls(2, "by a move 17 h after the first")
}

// TestController_ReconcileStartsMovesOfItsOwnLiveVolumesOnly calls Reconcile directly, as a request that got
// past the watches' predicates would (a requeue, a mapped target, a future watch): node-a's agent starts no
// move for node-c's LogicalVolume nor for its own one being deleted, whatever their instructions say, and
// does start one for its own live volume.
func TestController_ReconcileStartsMovesOfItsOwnLiveVolumesOnly(t *testing.T) {
	c := newCluster(t)
	var writes testenv.Writes
	counted, err := client.New(writes.Config(c.env.Config), client.Options{Scheme: c.env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctl := transfer.NewController(transfer.ControllerOptions{NodeName: c.nodeA, Client: counted,
		Identity: &issuer{ca: c.ca, clk: c.clk, node: c.nodeA}, Devices: &recordingDevices{files: map[string]string{}},
		VolumeGroup: func(string) (string, bool, error) { return "vg0", false, nil },
		ListenHost:  "127.0.0.1", ProgressDir: t.TempDir(), Timers: c.clk, Logger: logr.Discard()})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- ctl.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	reconcile := func(lv string) {
		t.Helper()
		if _, err := ctl.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: lv}}); err != nil {
			t.Fatalf("reconcile %s: %v", lv, err)
		}
	}

	other, deleting, mine := c.nodeC+"-pvc", c.nodeA+"-deleting", c.nodeA+"-pvc"
	for _, lv := range []string{other, deleting, mine} {
		node := c.nodeA
		if lv == other {
			node = c.nodeC
		}
		c.volume(lv, node, "vol-"+lv)
		c.annotate(lv, move.AnnotationSendTo, c.nodeB+"/"+c.nodeB+"-target/"+id)
	}
	d := c.lv(deleting)
	d.Finalizers = []string{"lvms.test/hold"}
	if err := c.env.Client.Update(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	if err := c.env.Client.Delete(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d := c.lv(deleting)
		d.Finalizers = nil
		_ = c.env.Client.Update(context.Background(), d)
	})

	reconcile(other)
	reconcile(deleting)
	if runs := ctl.Runs(); len(runs) != 0 {
		t.Fatalf("node-a's agent started %v for node-c's LogicalVolume or its own being deleted", runs)
	}
	reconcile(mine)
	if runs := ctl.Runs(); !slices.Equal(runs, []string{mine + "/" + id}) {
		t.Fatalf("node-a's agent runs %v for its own live LogicalVolume, want [%s/%s]", runs, mine, id)
	}

	// A malformed instruction is refused once, under the move ID it ends with: reconciling it again writes
	// nothing (a refusal is not a loop of writes on the API server).
	bad := c.nodeA + "-bad"
	c.volume(bad, c.nodeA, "vol-bad")
	c.annotate(bad, move.AnnotationSendTo, c.nodeB+"/target/0123/xyz")
	reconcile(bad)
	got := c.lv(bad)
	if v := got.Annotations[move.AnnotationCopyError]; !strings.HasPrefix(v, "xyz:refused the move instruction: ") {
		t.Errorf("the refused send-to is reported as %q, want it under move ID xyz", v)
	}
	before := writes.Snapshot()
	reconcile(bad)
	if n := writes.CountSince(before); n != 0 {
		t.Errorf("reconciling a refused instruction again made %d writes, want none", n)
	}
	if runs := ctl.Runs(); len(runs) != 1 {
		t.Errorf("a refused instruction started a move: %v", runs)
	}
}

// TestController_WakesOnTargetsThatReceiveFromItsNodeOnly: a target's receive-from wakes the sender of the
// node it names, and no other node's (a node name that merely starts like this one's included).
func TestController_WakesOnTargetsThatReceiveFromItsNodeOnly(t *testing.T) {
	ctl := transfer.NewController(transfer.ControllerOptions{NodeName: "node-a", Logger: logr.Discard()})
	for receiveFrom, want := range map[string]string{
		"node-a/pvc-1":   "pvc-1",
		"node-b/pvc-1":   "",
		"node-a2/pvc-1":  "",
		"node/pvc-1":     "",
		"node-a":         "",
		"":               "",
		"node-a/":        "",
		"node-a/pvc-1/x": "pvc-1/x",
	} {
		lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "target", Annotations: map[string]string{move.AnnotationReceiveFrom: receiveFrom}}}
		if got := ctl.SourceOf(lv); got != want {
			t.Errorf("receive-from %q wakes node-a's sender of %q, want %q", receiveFrom, got, want)
		}
	}
}

// What a caller leaves out (cmd/lvms sets neither a clock nor a backoff) gets the defaults; what it sets
// is kept.
func TestNewController_DefaultsWhatTheCallerLeavesOut(t *testing.T) {
	c := transfer.NewController(transfer.ControllerOptions{NodeName: "node-a"})
	if o := c.Options(); o.Clock == nil || o.Timers == nil || o.Backoff != transfer.DefaultBackoff {
		t.Errorf("defaults: clock %v, timers %v, backoff %+v; want real clocks and DefaultBackoff", o.Clock, o.Timers, o.Backoff)
	}
	fake := clocktesting.NewFakeClock(time.Unix(0, 0))
	b := wait.Backoff{Duration: time.Millisecond, Steps: 3}
	c = transfer.NewController(transfer.ControllerOptions{NodeName: "node-a", Clock: fake, Backoff: b})
	if o := c.Options(); o.Clock != fake || o.Backoff != b {
		t.Errorf("set options replaced: clock %v, backoff %+v", o.Clock, o.Backoff)
	}
}
