package transfer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
}

func (a *annotations) Annotate(_ context.Context, lv, key, value string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if value == "" {
		delete(a.m, lv+"/"+key)
	} else {
		a.m[lv+"/"+key] = value
	}
	return nil
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

func TestRunner_SourceAgentSendsTargetAgentReceives_BothReportTheSameDigest(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	ca, err := transferca.New(clk)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := file(t, dir, "src", 3<<20, true)
	dst := file(t, dir, "dst", 3<<20, false)
	devs := transfer.FileDevices{Resolve: func(lv string) (string, error) {
		return map[string]string{"pvc-1": src, "lvms-move-1": dst}[lv], nil
	}}
	ann := &annotations{m: map[string]string{}}
	runner := func(node string) *transfer.Runner {
		return &transfer.Runner{Identity: identity(t, ca, clk, node), Devices: devs, Reporter: ann, Addresses: ann,
			ListenHost: "127.0.0.1", ProgressDir: t.TempDir(), ChunkSize: 256 << 10, IdleTimeout: time.Minute, Clock: clock.RealClock{}}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	recvErr := make(chan error, 1)
	go func() {
		recvErr <- runner("node-b").Receive(ctx, "lvms-move-1", transfer.ReceiveInstruction{SourceNode: "node-a", SourceVolume: "pvc-1", MoveID: id})
	}()
	waitFor(t, "the receiver's address", func() bool { return ann.get("lvms-move-1", transfer.AnnotationReceiver) != "" })

	// An agent of another node is refused and reported; the receiver keeps waiting for node-a.
	err = runner("node-c").Send(ctx, "pvc-1", transfer.SendInstruction{TargetNode: "node-b", TargetVolume: "lvms-move-1", MoveID: id})
	if err == nil {
		t.Fatal("node-c's agent sent node-a's move")
	}
	waitFor(t, "the refusal of node-c", func() bool {
		return strings.Contains(ann.get("lvms-move-1", move.AnnotationCopyError), `its certificate is for node "node-c", expected node "node-a"`)
	})

	if err := runner("node-a").Send(ctx, "pvc-1", transfer.SendInstruction{TargetNode: "node-b", TargetVolume: "lvms-move-1", MoveID: id}); err != nil {
		t.Fatal(err)
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
	want := id + ":" + digest(t, src)
	if got := ann.get("pvc-1", move.AnnotationSHA256); got != want {
		t.Errorf("source report %q, want %q", got, want)
	}
	if got := ann.get("lvms-move-1", move.AnnotationSHA256); got != want {
		t.Errorf("target report %q, want %q", got, want)
	}
	if got := ann.get("lvms-move-1", move.AnnotationProgress); got != "12/12" {
		t.Errorf("progress annotation %q, want 12/12 (3 MiB in 256 KiB chunks)", got)
	}
	if ann.get("lvms-move-1", move.AnnotationCopyError) != "" {
		t.Error("the refused attempt's error stayed after the copy succeeded")
	}
	if digest(t, dst) != digest(t, src) {
		t.Fatal("the target differs from the source")
	}
}

// waitFor polls cond (up to 3000 times, 10 ms apart) and fails the test when it never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 3000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never saw %s", what)
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
	if _, err := transfer.ParseReceiveFrom("node-a/pvc-1", "1"); err == nil {
		t.Error("a short move ID was accepted")
	}
}
