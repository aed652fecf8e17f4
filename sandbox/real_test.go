package sandbox

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/localvm"
	"github.com/lvms-dev/lvms/testtier"
)

// TestRealSandbox_Walkthrough starts the real-node sandbox as make run does and runs the README's
// walkthrough against it line by line, as written: the demo pod's data, a claim and pod of one's own, online
// expansion, snapshot and restore, clone, a move to the other node and its confirmation, capacities, the
// TUI, a bundle and its analysis; then the console's pages. Ctrl-C (the context) must leave nothing behind.
func TestRealSandbox_Walkthrough(t *testing.T) {
	needRealSandbox(t)
	for _, tool := range []string{"jq", "script"} {
		if _, err := exec.LookPath(tool); err != nil {
			testtier.Unavailablef(t, "%s is not installed (the walkthrough uses it)", tool)
		}
	}
	state := t.TempDir()
	bin := testenv.BuildLVMS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Real: true, StateDir: state, Namespace: RealNamespace, RepoRoot: testenv.RepoRoot(), Binary: bin,
			ConsoleAddr: "127.0.0.1:0", Out: out, Ready: func(kc string) { ready <- kc }})
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the sandbox stopped with %v", err)
			}
		case <-time.After(3 * time.Minute):
			t.Errorf("the sandbox did not stop within 3 minutes:\n%s", out)
		}
	}
	defer stop()
	var kubeconfig string
	select {
	case kubeconfig = <-ready:
	case err := <-done:
		stopped = true
		t.Fatalf("the sandbox stopped before it was up: %v\n%s", err, out)
	case <-time.After(40 * time.Minute):
		t.Fatalf("the sandbox is not up after 40 minutes:\n%s", out)
	}
	if !strings.Contains(out.String(), "The demo pod writer-0 runs with its data on a logical volume") {
		t.Errorf("make run's last words do not say the demo pod runs:\n%s", out)
	}
	var mode strings.Builder
	if err := PrintMode(state, &mode); err != nil || !strings.Contains(mode.String(), "real nodes") {
		t.Errorf("--print-status's mode = %q, %v; want real nodes", mode.String(), err)
	}

	runWalkthrough(t, readmeBlock(t, "<!-- sandbox-walkthrough:start -->\n", "real-node walkthrough"), state, bin, kubeconfig)

	console := regexp.MustCompile(`console: (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(out.String())
	if console == nil {
		t.Fatalf("no console URL in:\n%s", out)
	}
	for path, want := range map[string][]string{
		"/":                       {"lvms-node-1", "lvms-node-2"},
		"/nodes/lvms-node-1":      {"/dev/vda", "/dev/vdb", "restored", "clone"},
		"/deviceclasses":          {"thick", "thin"},
		"/volumes":                {"mine", "restored", "clone", "data-writer-0"},
		"/claims/demo/mine/move":  {"lvms-node-2"},
		"/events":                 {"demo", "mine"},
		"/api/v1/volumes":         {"restored"},
		"/nodes/lvms-node-2":      {"/dev/vdb", "mine"},
		"/claims/demo/clone/move": {"lvms-node-1", "lvms-node-2"},
	} {
		body := get(t, console[1]+path)
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("console page %s does not name %q", path, w)
			}
		}
	}

	stop()
	procs, err := Processes(state)
	if err != nil || len(procs) > 0 {
		t.Errorf("after the stop these still run: %v (%v)", procs, err)
	}
	for _, left := range []string{"vms", "nodeconfig", "overlay", "images", "kubeconfig", "cluster", "egress.sock"} {
		if _, err := os.Stat(filepath.Join(state, left)); err == nil {
			t.Errorf("after the stop %s is still in the state directory", left)
		}
	}
	if loops, err := loopsUnder(context.Background(), state); err != nil || len(loops) > 0 {
		t.Errorf("after the stop these loop devices are left: %v (%v)", loops, err)
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mounts), state) {
		t.Errorf("after the stop something is still mounted under %s (%v)", state, err)
	}
	if !strings.Contains(out.String(), "Stopped; nothing left behind.") {
		t.Errorf("the stop did not end cleanly:\n%s", out)
	}
}

// readmeBlock is the sh block of README.md that follows after, or fails the test naming what.
func readmeBlock(t *testing.T, after, what string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), after+"```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || block == "" {
		t.Fatalf("README.md's Sandbox section has no %s block", what)
	}
	return block
}

// runWalkthrough runs a README walkthrough block line by line against the sandbox in state, each under
// bash -o pipefail: its kubeconfig for the export, bin for bin/lvms (lvms local with --state-dir), state
// for /tmp (so a second run finds no bundle of the first), the kubectl the sandbox built when there is none
// on PATH, and the TUI under a terminal that types q. Each line must succeed.
func runWalkthrough(t *testing.T, block, state, bin, kubeconfig string) {
	t.Helper()
	kubectl := "kubectl"
	if _, err := exec.LookPath(kubectl); err != nil {
		bins, err := FindBinaries(context.Background(), testenv.RepoRoot(), false)
		if err != nil {
			t.Fatal(err)
		}
		kubectl = filepath.Join(bins.Node, "kubectl")
	}
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "  #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "export KUBECONFIG=") {
			continue
		}
		// What the walkthrough writes under /tmp goes to the test's own directory, removed with it.
		cmdline := strings.ReplaceAll(line, " /tmp/", " "+state+"/")
		cmdline = strings.ReplaceAll(cmdline, "bin/lvms local", bin+" local --state-dir "+state)
		cmdline = strings.ReplaceAll(cmdline, "bin/lvms ", bin+" ")
		switch {
		case line == "bin/lvms tui":
			// A terminal wide enough for the node names; q once it has drawn them, and again in case it was loading.
			// Under pipefail neither end may die of SIGPIPE: the keys' writer outlives the TUI once the first q
			// quits it, and grep reads to the end (-c, not -q) so sed is never cut off.
			cmdline = "{ (sleep 15; printf q; sleep 5; printf q) || true; } | timeout 120 script -qefc 'stty cols 160 rows 50; " + bin + " tui' /dev/null | " +
				`sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' | grep -c lvms-node-2`
		case strings.HasPrefix(line, "kubectl "):
			cmdline = kubectl + strings.TrimPrefix(cmdline, "kubectl")
		case strings.HasPrefix(line, "bin/lvms "):
		default:
			t.Fatalf("the walkthrough has a line this test does not know how to run: %s", line)
		}
		began := time.Now()
		cmd := exec.Command("bash", "-o", "pipefail", "-c", cmdline)
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			// What a reader of a CI log needs to tell why: every pod and claim, and the latest events.
			diag := exec.Command("bash", "-c", kubectl+" get pods,pvc -A -o wide; "+kubectl+" get events -A --sort-by=.lastTimestamp | tail -40")
			diag.Env = cmd.Env
			cluster, _ := diag.CombinedOutput()
			t.Fatalf("walkthrough line %q: %v\n%s\n--- the cluster then:\n%s", line, err, out, cluster)
		}
		t.Logf("$ %s (%s)\n%s", line, time.Since(began).Round(time.Second), out)
	}
}

// needRealSandbox is what the real-node sandbox needs besides the control plane's programs (FindBinaries
// names those): qemu and the product image.
func needRealSandbox(t *testing.T) {
	t.Helper()
	testtier.Needs(t, "the real-node sandbox (node VMs under qemu, kubelet and containerd)")
	if reason := localvm.Unavailable(); reason != "" {
		testtier.Unavailable(t, reason+": the real-node sandbox cannot run")
	}
	if _, err := os.Stat(filepath.Join(testenv.RepoRoot(), "bin", "image", "oci")); err != nil {
		testtier.Unavailablef(t, "no product image (bin/image/oci: %v): run make image", err)
	}
}

// TestRealSandbox_ANodeThatDoesNotComeUpIsReportedWithItsConsole boots the node VMs with a program that
// fails where lvms local serve-node would start containerd and kubelet: lvms local must say which node
// did not come up, with the end of its console, and leave nothing running.
func TestRealSandbox_ANodeThatDoesNotComeUpIsReportedWithItsConsole(t *testing.T) {
	needRealSandbox(t)
	failing := filepath.Join(t.TempDir(), "lvms")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'lvms-test: this node fails on purpose'\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Real: true, StateDir: state, Namespace: RealNamespace, RepoRoot: testenv.RepoRoot(),
			Binary: failing, ConsoleAddr: "127.0.0.1:0", Out: out})
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Minute):
		t.Fatalf("lvms local still runs 15 minutes after its nodes' program exited:\n%s", out)
	}
	if err == nil {
		t.Fatal("lvms local with nodes that cannot start returned no error")
	}
	for _, want := range []string{"node lvms-node-1 did not start its kubelet", "console of lvms-node-1", "lvms-test: this node fails on purpose"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if procs, perr := Processes(state); perr != nil || len(procs) > 0 {
		t.Errorf("after the failed start these still run: %v (%v)", procs, perr)
	}
	for _, left := range []string{"vms", "nodeconfig", "images", "cluster", "egress.sock"} {
		if _, err := os.Stat(filepath.Join(state, left)); err == nil {
			t.Errorf("after the failed start %s is still in the state directory", left)
		}
	}
}

// TestRealSandbox_NodesThatHangAreBootedAgainOnce boots node VMs whose program never starts a kubelet (as
// a guest kernel that hangs at boot): lvms local boots them once more, says so, then gives up naming the
// node, and leaves nothing running.
func TestRealSandbox_NodesThatHangAreBootedAgainOnce(t *testing.T) {
	needRealSandbox(t)
	hanging := filepath.Join(t.TempDir(), "lvms")
	if err := os.WriteFile(hanging, []byte("#!/bin/sh\necho 'lvms-test: this node hangs on purpose'\nexec sleep 100000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(was []time.Duration) { nodesUpTimeouts = was }(nodesUpTimeouts)
	nodesUpTimeouts = []time.Duration{45 * time.Second, 45 * time.Second}
	state := t.TempDir()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Real: true, StateDir: state, Namespace: RealNamespace, RepoRoot: testenv.RepoRoot(),
			Binary: hanging, ConsoleAddr: "127.0.0.1:0", Out: out})
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Minute):
		t.Fatalf("lvms local still runs 15 minutes after starting nodes that hang:\n%s", out)
	}
	if n := strings.Count(out.String(), "booting the node VMs again"); n != 1 {
		t.Errorf("the node VMs were booted again %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{"node lvms-node-1 did not start its kubelet", "deadline exceeded", "lvms-test: this node hangs on purpose"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if procs, perr := Processes(state); perr != nil || len(procs) > 0 {
		t.Errorf("after the failed start these still run: %v (%v)", procs, perr)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}
