package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/spf13/cobra"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/diagnostics/collect"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// brokenBundle writes the healthy hand-made bundle with worker-b Degraded for a missing device.
func brokenBundle(t *testing.T, dir string) string {
	t.Helper()
	s := bundletest.Healthy()
	n := bundletest.Find[*lvmv2.LVMNode](s, bundletest.NodeB)
	n.Status.State, n.Status.Message = lvmv2.StateDegraded, "/dev/nvme1n1 was not found"
	n.Spec.VolumeGroups[0].DeviceSelector.DeviceSelectorTerms[0].MatchExpressions = []lvmv2.DeviceSelectorRequirement{
		{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: []string{"/dev/sdb", "/dev/nvme1n1"}}}
	g := &n.Status.VolumeGroups[0]
	g.Devices.Excluded = append(g.Devices.Excluded, lvmv2.ExcludedDevice{KName: "/dev/nvme1n1", Reasons: []string{"/dev/nvme1n1 was not found"}, ReasonCodes: []string{"NotFound"}})
	path := filepath.Join(dir, "broken.tar.gz")
	s.WriteTarGz(t, path)
	return path
}

func TestAnalyze_PrintsTheCause(t *testing.T) {
	dir := t.TempDir()
	path := brokenBundle(t, dir)
	out, err := run(t, "analyze", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Bundle of hand-made collected 2026-11-22 10:00:00 UTC by kube:admin", "FAIL  NodeNotReady: Node storage is Degraded",
		"Cause: Path not found on the node", "FAIL  RequiredPathMissing", "fix:", "fail,"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := run(t, "analyze", "--fail-on", "fail", path); err == nil || exitCode(err) != exitFound {
		t.Errorf("--fail-on fail with failing findings: %v (exit code %d), want exit code %d, not an error's 1", err, exitCode(err), exitFound)
	}
	healthy := filepath.Join(dir, "healthy.tar.gz")
	bundletest.Healthy().WriteTarGz(t, healthy)
	if _, err := run(t, "analyze", "--fail-on", "warn", healthy); err != nil {
		t.Errorf("--fail-on warn on a healthy bundle: %v", err)
	}
	js, err := run(t, "analyze", "-o", "json", path)
	if err != nil {
		t.Fatal(err)
	}
	var doc analyze.Document
	if err := json.Unmarshal([]byte(js), &doc); err != nil || doc.Summary.Fail == 0 {
		t.Errorf("json output (%v): %s", err, js)
	}
}

func TestBundleDiffAndExtract(t *testing.T) {
	dir := t.TempDir()
	healthy := filepath.Join(dir, "healthy.tar.gz")
	bundletest.Healthy().WriteTarGz(t, healthy)
	broken := brokenBundle(t, dir)
	out, err := run(t, "bundle", "diff", healthy, broken)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"~ node worker-b", "Degraded: /dev/nvme1n1 was not found", "+ worker-b vg1 /dev/nvme1n1: missing [NotFound]"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	target := filepath.Join(dir, "x")
	out, err = run(t, "bundle", "extract", broken, target)
	if err != nil || !strings.Contains(out, "Extracted") {
		t.Fatalf("extract: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(target, "nodes", "worker-b", "lvmd.yaml")); err != nil {
		t.Error(err)
	}
}

func TestBundleCommands_BadInput(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.tar.gz")
	bundletest.Healthy().WriteTarGz(t, good)
	data, _ := os.ReadFile(good)
	cut := filepath.Join(dir, "cut.tar.gz")
	if err := os.WriteFile(cut, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", text}, "not gzip-compressed"},
		{[]string{"analyze", cut}, "truncated or corrupt"},
		{[]string{"analyze", filepath.Join(dir, "missing.tar.gz")}, "no such file"},
		{[]string{"bundle", "diff", good, text}, "not gzip-compressed"},
		{[]string{"bundle", "extract", cut, filepath.Join(dir, "out")}, "truncated or corrupt"},
		{[]string{"analyze", "-o", "yaml", good}, "use text or json"},
		{[]string{"bundle", "--max-size", "lots"}, "--max-size"},
	} {
		_, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("lvms %s: %v, want an error saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("a failed extraction created its directory")
	}
}

// TestBundleOptions_OneClock: --since counts back from the collection's clock, which the collector also uses,
// so the window, the bundle's name and its manifest agree on any date.
func TestBundleOptions_OneClock(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:6443}\n"+
		"contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{time.Date(1987, 2, 28, 12, 0, 0, 0, time.UTC), time.Date(2191, 12, 31, 23, 0, 0, 0, time.UTC)} {
		clk := clocktesting.NewFakeClock(at)
		o := &bundleOptions{agentAccess: collect.AccessProxy, kubeconfig: kc, since: 2 * time.Hour, maxSize: "1Gi", logLimit: "16Mi", clock: clk}
		opts, err := o.collectOptions(&cobra.Command{})
		if err != nil {
			t.Fatal(err)
		}
		if !opts.Since.Equal(at.Add(-2*time.Hour)) || opts.Clock != clk {
			t.Errorf("at %s: since = %s, clock %T; want two hours before, from the same clock", at, opts.Since, opts.Clock)
		}
	}
}

// `lvms bundle` against an API server that does not answer fails once, naming the server, and writes no
// bundle (issue 23: it used to exit 0 with a bundle of "the cluster does not serve ..." findings).
func TestBundle_UnreachableClusterFailsWithoutABundle(t *testing.T) {
	kubeconfig := testenv.WriteKubeconfig(t, &rest.Config{Host: "https://127.0.0.1:1"})
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	_, err := run(t, "bundle", "--kubeconfig", kubeconfig, out)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the API server at https://127.0.0.1:1") {
		t.Fatalf("err = %v, want it to say the API server cannot be reached", err)
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Errorf("%s was written for a cluster that never answered", out)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".lvms-bundle-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// The bundle file is the argument or --output-file; -o, a format everywhere else, still names it with a
// warning; naming two files is refused before anything is collected.
func TestBundle_FileIsTheArgumentOrOutputFile(t *testing.T) {
	out, err := run(t, "bundle", "-o", "a.tar.gz", "b.tar.gz")
	if err == nil || !strings.Contains(err.Error(), "the bundle file is named twice (b.tar.gz and --output-file a.tar.gz)") {
		t.Errorf("two files: %v", err)
	}
	if !strings.Contains(out, "-o/--output is a format in lvms; name the file as the argument or with --output-file") {
		t.Errorf("-o gives no deprecation warning:\n%s", out)
	}
}
