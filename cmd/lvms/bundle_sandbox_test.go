package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/sandbox"
	"github.com/lvms-dev/lvms/web"
)

// TestBundle_Sandbox runs `lvms local`'s sandbox (loop-device disks, in-process agents and operator), waits
// for its Degraded node (the thin pool cannot be made without device-mapper), then runs `lvms bundle` and
// `lvms analyze` as a user would, and opens the bundle as the console does.
func TestBundle_Sandbox(t *testing.T) {
	loopdev.RequireRoot(t)
	const ns = "lvms-sandbox"
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var out bytes.Buffer
	stateDir := t.TempDir()
	bin := testenv.BuildLVMS(t)
	go func() {
		done <- sandbox.Run(ctx, sandbox.Options{StateDir: stateDir, Namespace: ns, RepoRoot: testenv.RepoRoot(), Binary: bin, ConsoleAddr: "127.0.0.1:0", Out: &out,
			Ready: func(kc string) { ready <- kc }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sandbox: %v\n%s", err, out.String())
		}
	})
	var kubeconfig string
	select {
	case kubeconfig = <-ready:
	case err := <-done:
		t.Fatalf("the sandbox stopped: %v\n%s", err, out.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("the sandbox did not start within 5 minutes:\n%s", out.String())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	degraded, message := "", ""
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && degraded == ""; time.Sleep(time.Second) {
		var nodes lvmv2.LVMNodeList
		if err := c.List(ctx, &nodes, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			if n.Status.State == lvmv2.StateDegraded {
				degraded, message = n.Name, n.Status.Message
			}
		}
	}
	if degraded == "" {
		t.Fatalf("no LVMNode of the sandbox became Degraded within 3 minutes")
	}
	// Let the other nodes settle too, so that the live view and the bundle describe the same state.
	waitSettled(t, ctx, c, ns)

	sa := serveSandboxAgents(t, ctx, cfg, c, stateDir, ns)

	path := filepath.Join(t.TempDir(), "sandbox.tar.gz")
	got, err := run(t, "bundle", "--kubeconfig", kubeconfig, "--output-file", path, "--agent-service-account", sa)
	if err != nil {
		t.Fatalf("lvms bundle: %v\n%s", err, got)
	}
	if !strings.Contains(got, "Wrote "+path) {
		t.Errorf("lvms bundle says:\n%s", got)
	}
	report, err := run(t, "analyze", path)
	if err != nil {
		t.Fatalf("lvms analyze: %v\n%s", err, report)
	}
	js, err := run(t, "analyze", "-o", "json", path)
	if err != nil {
		t.Fatal(err)
	}
	var doc analyze.Document
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(doc.Findings, func(f analyze.Finding) bool {
		return f.CheckName == analyze.CheckNodeNotReady && f.Node == degraded
	})
	if i < 0 {
		t.Fatalf("lvms analyze does not report the Degraded node %s (%s):\n%s", degraded, message, report)
	}
	f := doc.Findings[i]
	if f.Severity != analyze.Fail || !strings.Contains(f.Message, degraded+" is Degraded") || len(f.Codes) == 0 || f.Fix == "" {
		t.Errorf("finding for %s = %+v", degraded, f)
	}
	if message != "" && !strings.Contains(f.Message, message) {
		t.Errorf("the finding does not carry the node's own message %q: %s", message, f.Message)
	}
	t.Logf("sandbox: %s is Degraded (%s); lvms analyze says: %s (codes %v)\n\nlvms analyze %s:\n%s", degraded, message, f.Message, f.Codes, path, report)

	b, err := bundle.Load(path, bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range b.Manifest.Collectors {
		if strings.HasPrefix(col.Name, "node/") && col.Error != "" {
			t.Errorf("collector %s: %s", col.Name, col.Error)
		}
	}
	verdicts := map[string][]diagnostics.VolumeGroupVerdicts{}
	for _, spec := range sandbox.Topology() {
		st := b.Nodes[spec.Name]
		if st == nil {
			t.Errorf("no agent view of %s", spec.Name)
			continue
		}
		verdicts[spec.Name] = st.View.Verdicts
		if !bytes.Contains(st.View.Lsblk, []byte("/dev/loop")) || len(st.View.FullReport) == 0 {
			t.Errorf("%s: the view lacks the node's loop devices or its LVM report (errors %+v)", spec.Name, st.View.Errors)
		}
	}
	if st := b.Nodes["lvms-local-1"]; st == nil || !bytes.Contains(st.View.FullReport, []byte("vg-data")) {
		t.Error("lvms-local-1's LVM report (real lvm2, read-only, its own devices file) lacks vg-data")
	}
	if !hasVerdict(verdicts, "lvms-local-1", "ForeignSignature") {
		t.Errorf("lvms-local-1's verdicts do not exclude its ext4 disk: %+v", verdicts["lvms-local-1"])
	}
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	liveSrc := live.New(lctx, cfg, live.Options{Cluster: b.Manifest.Cluster})
	liveSnap, err := liveSrc.Snapshot(lctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("must-gather entrypoint", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "must-gather")
		t.Setenv("MUST_GATHER_SINCE", "2h")
		out, err := run(t, "gather", "--kubeconfig", kubeconfig, "--dest", dest, "--agent-access", "proxy", "--agent-service-account", sa, "--no-logs")
		if err != nil {
			t.Fatalf("lvms gather: %v\n%s", err, out)
		}
		g, err := bundle.Load(dest, bundle.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if since := g.Manifest.Options.Since; since.IsZero() || time.Since(since) < 2*time.Hour || time.Since(since) > 3*time.Hour {
			t.Errorf("MUST_GATHER_SINCE=2h gave since %s", since)
		}
		if len(g.Nodes) != 3 || len(g.Snapshot().LVMNodes) != len(b.Snapshot().LVMNodes) {
			t.Errorf("must-gather directory: %d agent views, %d LVMNodes", len(g.Nodes), len(g.Snapshot().LVMNodes))
		}
	})
	bundleSnap, _ := bundle.NewSource(b).Snapshot(ctx)
	compareConsoleViews(t, liveSnap, bundleSnap)
	pages := bundletest.ComparePages(t, liveSrc, bundle.NewSource(b), &web.Bundle{Name: path, At: b.Manifest.Started, Findings: analyze.Run(b)})
	t.Logf("%d console pages are the same live and from the bundle", pages)
}

// waitSettled waits until no LVMNode is Progressing or without status.
func waitSettled(t *testing.T, ctx context.Context, c client.Client, ns string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		var nodes lvmv2.LVMNodeList
		if err := c.List(ctx, &nodes, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(nodes.Items, func(n lvmv2.LVMNode) bool {
			return n.Status.State == "" || n.Status.State == lvmv2.StateProgressing || n.Status.ObservedGeneration < n.Generation
		}) {
			return
		}
	}
	var n lvmv2.LVMNode
	_ = c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "lvms-local-1"}, &n)
	t.Fatalf("the sandbox's nodes did not settle within 2 minutes (lvms-local-1: %s)", n.Status.State)
}

// compareConsoleViews renders the console's views of both snapshots at the same time and compares them.
func compareConsoleViews(t *testing.T, l, b *console.Snapshot) {
	t.Helper()
	bb := *b
	bb.At = l.At
	render := func(s *console.Snapshot) map[string]string {
		out := map[string]string{}
		put := func(name string, v any) {
			j, _ := json.MarshalIndent(v, "", " ")
			out[name] = string(j)
		}
		o := console.BuildOverview(s)
		put("overview", o)
		put("volumes", console.Volumes(s))
		put("classes", console.DeviceClasses(s))
		put("events", console.Events(s))
		for _, n := range o.Nodes {
			v, err := console.Node(s, n.Name)
			if err != nil {
				out["node "+n.Name] = err.Error()
				continue
			}
			put("node "+n.Name, v)
		}
		return out
	}
	lv, bv := render(l), render(&bb)
	for name, want := range lv {
		if got := bv[name]; got != want {
			t.Errorf("%s differs between the live cluster and the bundle:\nlive:   %.2000s\nbundle: %.2000s", name, want, got)
		}
	}
	if len(lv) != len(bv) {
		t.Errorf("live renders %d views, the bundle %d", len(lv), len(bv))
	}
}
