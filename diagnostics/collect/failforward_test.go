package collect_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/collect"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

func collector(m bundle.Manifest, name string) (bundle.CollectorRun, bool) {
	i := slices.IndexFunc(m.Collectors, func(c bundle.CollectorRun) bool { return c.Name == name })
	if i < 0 {
		return bundle.CollectorRun{}, false
	}
	return m.Collectors[i], true
}

// TestBundle_FailsForward: without a token for the node agents and with a kubelet that cannot serve logs
// (envtest has none), those collectors fail, say why, and everything else is still collected and analyzed.
func TestBundle_FailsForward(t *testing.T) {
	testenv.Require(t)
	prepare(t)
	ctx := context.Background()
	startAgentsOnce(t, ctx)
	path, sum := collectTo(t, ctx, collect.Options{Config: env.Config, Cluster: "envtest", Namespaces: []string{preparedNS}})
	m := sum.Manifest
	agents, ok := collector(m, "node-agents")
	if !ok || !strings.Contains(agents.Error, "--agent-service-account") {
		t.Errorf("node-agents collector = %+v, want it to fail saying how to pass a token", agents)
	}
	logs, ok := collector(m, "logs/"+preparedNS+"/lvms-node-agent-worker-a")
	if !ok || logs.Error == "" {
		t.Errorf("logs collector = %+v, want a failure (no kubelet)", logs)
	}
	nodes, ok := collector(m, "resources/nodes")
	if !ok || nodes.Error != "" || nodes.Files != 3 {
		t.Errorf("nodes collector = %+v, want 3 files despite the failures", nodes)
	}
	b, err := bundle.Load(path, bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	fs := analyze.Run(b)
	if !slices.ContainsFunc(fs, func(f analyze.Finding) bool {
		return f.CheckName == analyze.CheckCollection && strings.Contains(f.Message, "node-agents")
	}) {
		t.Error("the analysis does not say the node agents' views are missing")
	}
	if !slices.ContainsFunc(fs, func(f analyze.Finding) bool {
		return f.CheckName == analyze.CheckNodeNotReady && f.Node == consoletest.NodeB && f.Severity == analyze.Fail
	}) {
		t.Error("the analysis lost the Degraded node")
	}
}

func TestBundle_Bounds(t *testing.T) {
	testenv.Require(t)
	prepare(t)
	ctx := context.Background()
	t.Run("size", func(t *testing.T) {
		path, sum := collectTo(t, ctx, collect.Options{Config: env.Config, MaxBytes: 4000, NoLogs: true, NoAgentViews: true})
		m := sum.Manifest
		skipped := 0
		for _, c := range m.Collectors {
			skipped += c.Skipped
		}
		if !m.SizeLimitReached || skipped == 0 || sum.Bytes > 4000 {
			t.Errorf("size limit reached %v, skipped %d, %d bytes written; want the limit reached and held", m.SizeLimitReached, skipped, sum.Bytes)
		}
		b, err := bundle.Load(path, bundle.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(analyze.Run(b), func(f analyze.Finding) bool { return strings.Contains(f.Title, "size limit") }) {
			t.Error("the analysis does not say files were left out")
		}
	})
	t.Run("time", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		cancel() // a collection whose time is already up still writes a valid bundle that says so
		path, sum := collectTo(t, ctx, collect.Options{Config: env.Config, Timeout: time.Minute})
		for _, c := range sum.Manifest.Collectors {
			if !strings.Contains(c.Error, "not run") && !strings.Contains(c.Error, "context canceled") {
				t.Errorf("collector %s ran: %+v", c.Name, c)
			}
		}
		if _, err := bundle.Load(path, bundle.Limits{}); err != nil {
			t.Errorf("the bundle of a stopped collection does not load: %v", err)
		}
	})
}

// TestGather_WritesADirectory: the must-gather entrypoint writes the same layout as files.
func TestGather_WritesADirectory(t *testing.T) {
	testenv.Require(t)
	prepare(t)
	dir := t.TempDir()
	sum, err := collect.WriteDir(context.Background(), collect.Options{Config: env.Config, Version: "v-test", NoLogs: true, NoAgentViews: true}, dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := os.ReadFile(dir + "/version")
	if err != nil || string(v) != "lvms\nv-test\n" {
		t.Errorf("version file = %q (%v)", v, err)
	}
	b, err := bundle.Load(dir, bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Snapshot().LVMNodes) != 3 || len(sum.Findings) == 0 {
		t.Errorf("directory bundle: %d LVMNodes, %d findings", len(b.Snapshot().LVMNodes), len(sum.Findings))
	}
}
