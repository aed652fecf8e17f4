package buildcache

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The e2e/tools scripts run here as `make` runs them, with a temporary LVMS_CACHE and a stub installed as go,
// npm, node and dpkg-query: a build takes no time, each is counted, and one chosen step can be stopped
// halfway through writing its output.

// stub records every build step (a binary's name, or npm) in $STUB_DIR/builds. The first step named
// $STUB_BLOCK writes part of its output (executable, as go build's), says so through the fifo
// $STUB_DIR/started and waits for a line on the fifo $STUB_DIR/release.
const stub = `#!/usr/bin/env bash
set -euo pipefail
block() {
  [[ $1 == "${STUB_BLOCK:-}" ]] && mkdir "$STUB_DIR/blocked" 2>/dev/null || return 0
  printf partial >"$2" && chmod +x "$2"
  echo started >"$STUB_DIR/started"
  read -r _ <"$STUB_DIR/release"
}
case ${0##*/} in
go)
  case $1 in
  list) echo v0.0.0-stub ;;
  build)
    while (($#)); do
      if [[ $1 == -o ]]; then out=$2; shift; fi
      pkg=$1; shift
    done
    echo "${out##*/}" >>"$STUB_DIR/builds"
    block "${out##*/}" "$out"
    echo "built $pkg" >"$out" && chmod +x "$out" ;;
  *) exit 1 ;;
  esac ;;
npm)
  echo npm >>"$STUB_DIR/builds"
  mkdir -p node_modules/playwright-core
  block npm node_modules/playwright-core/cli.js
  echo "Version 1.52.0" >node_modules/playwright-core/cli.js ;;
node) [[ ${2:-} == --version && -f $1 ]] && cat "$1" ;;
dpkg-query) echo 'install ok installed' ;;
*) exit 1 ;;
esac
`

// script is one cached step of e2e/tools.
type script struct {
	name     string
	dir      string            // the artifacts' directory under LVMS_CACHE (the one locked)
	block    string            // the build step stopped halfway
	artifact string            // the step's artifact under dir, and what it holds once complete
	want     string            //
	builds   map[string]int    // build steps of a run from an empty cache
	links    map[string]string // symlinks under dir and the contents they lead to
}

var controlPlaneBuilds = map[string]int{"etcd": 1, "kube-apiserver": 1, "kubectl": 1}

var nodeBuilds = map[string]int{"kube-controller-manager": 1, "kube-scheduler": 1, "kubelet": 1, "kubectl": 1,
	"containerd": 1, "containerd-shim-runc-v2": 1, "ctr": 1, "snapshot-controller-v0.0.0-stub": 1}

func merge(ms ...map[string]int) map[string]int {
	out := map[string]int{}
	for _, m := range ms {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

var scripts = []script{
	{name: "build.sh", dir: "controlplane/k8s-v0.0.0-stub_etcd-v0.0.0-stub", block: "kube-apiserver",
		artifact: "kube-apiserver", want: "built k8s.io/kubernetes/cmd/kube-apiserver\n", builds: controlPlaneBuilds},
	{name: "build-node.sh", dir: "node/k8s-v0.0.0-stub_containerd-v0.0.0-stub", block: "kubelet",
		artifact: "kubelet", want: "built k8s.io/kubernetes/cmd/kubelet\n", builds: nodeBuilds,
		links: map[string]string{"snapshot-controller": "built github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller\n"}},
	// deps.sh runs both scripts above, then installs the playwright driver.
	{name: "deps.sh", dir: "playwright-1.52.0", block: "npm", artifact: "drv/package/cli.js", want: "Version 1.52.0\n",
		builds: merge(controlPlaneBuilds, nodeBuilds, map[string]int{"npm": 1})},
}

// env is one test's temporary cache and stub.
type env struct {
	t           *testing.T
	cache, stub string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, cache: filepath.Join(t.TempDir(), "cache"), stub: t.TempDir()}
	bin := filepath.Join(e.stub, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "stub"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go", "npm", "node", "dpkg-query"} {
		if err := os.Symlink("stub", filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, fifo := range []string{"started", "release"} {
		if err := syscall.Mkfifo(filepath.Join(e.stub, fifo), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// proc is a running script.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *output
	done           chan struct{}
	err            error
}

// start runs the script with the build step block stopped halfway (the first time only).
func (e *env) start(s script) *proc {
	e.t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "e2e", "tools", s.name))
	if err != nil {
		e.t.Fatal(err)
	}
	p := &proc{cmd: exec.Command(path), stdout: newOutput(), stderr: newOutput(), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "PATH="+filepath.Join(e.stub, "bin")+":"+os.Getenv("PATH"),
		"LVMS_CACHE="+e.cache, "HOME="+e.stub, "STUB_DIR="+e.stub, "STUB_BLOCK="+s.block)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); <-p.done })
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p
}

// wait waits for the script to end and fails the test unless it succeeded.
func (p *proc) wait(t *testing.T) {
	t.Helper()
	<-p.done
	if p.err != nil {
		t.Fatalf("%s: %v\n%s", p.cmd.Path, p.err, p.stderr)
	}
}

// awaitBlocked returns once the stopped build step has written part of its output, failing the test if p
// ends first.
func (e *env) awaitBlocked(p *proc) {
	e.t.Helper()
	got := make(chan struct{})
	go func() { os.ReadFile(filepath.Join(e.stub, "started")); close(got) }()
	select {
	case <-got:
	case <-p.done:
		e.t.Fatalf("%s ended before its build step started: %v\n%s", p.cmd.Path, p.err, p.stderr)
	}
}

// release lets the stopped build step finish.
func (e *env) release() {
	if err := os.WriteFile(filepath.Join(e.stub, "release"), []byte("go\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// builds counts the build steps run so far.
func (e *env) builds() map[string]int {
	b, err := os.ReadFile(filepath.Join(e.stub, "builds"))
	if err != nil && !os.IsNotExist(err) {
		e.t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		out[l]++
	}
	return out
}

// checkBuilds compares the build steps run with want.
func (e *env) checkBuilds(want map[string]int) {
	e.t.Helper()
	got := e.builds()
	for k, v := range want {
		if got[k] != v {
			e.t.Errorf("%s built %d times, want %d (all builds: %v)", k, got[k], v, got)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			e.t.Errorf("%s built, want it not built (all builds: %v)", k, got)
		}
	}
}

// checkComplete fails the test unless the script's artifacts are complete and no temporary name is left.
func (e *env) checkComplete(s script) {
	e.t.Helper()
	dir := filepath.Join(e.cache, s.dir)
	if b, err := os.ReadFile(filepath.Join(dir, s.artifact)); err != nil || string(b) != s.want {
		e.t.Errorf("%s: %q, %v; want %q", s.artifact, b, err, s.want)
	}
	for link, want := range s.links {
		if b, err := os.ReadFile(filepath.Join(dir, link)); err != nil || string(b) != want {
			e.t.Errorf("%s leads to %q, %v; want %q", link, b, err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tmp.*")); len(left) != 0 {
		e.t.Errorf("temporary names left in %s: %v", dir, left)
	}
}

// TestScripts_TwoRunsAtOnceBuildOnceAndBothGetTheWholeArtifact: while a first run is halfway through a build,
// a second run of the same script waits on the cache's lock, then finds what the first built; each build step
// ran once and both runs succeed with the whole artifact.
func TestScripts_TwoRunsAtOnceBuildOnceAndBothGetTheWholeArtifact(t *testing.T) {
	for _, s := range scripts {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			first := e.start(s)
			e.awaitBlocked(first)
			if _, err := os.Stat(filepath.Join(e.cache, s.dir, s.artifact)); err == nil {
				t.Errorf("%s is there while it is half-written", s.artifact)
			}
			second := e.start(s)
			second.stderr.await(t, "waiting for another run building into "+filepath.Join(e.cache, s.dir), second.done)
			e.release()
			first.wait(t)
			second.wait(t)
			if a, b := first.stdout.String(), second.stdout.String(); a != b {
				t.Errorf("the runs printed %q and %q", a, b)
			}
			e.checkBuilds(s.builds)
			e.checkComplete(s)
		})
	}
}

// TestScripts_AKilledBuildLeavesNothingTakenAsBuilt: a run killed (SIGKILL, with its build) halfway through
// writing an artifact leaves no artifact under its name; the next run builds that one again, reuses the ones
// finished before, and removes the half-written temporary.
func TestScripts_AKilledBuildLeavesNothingTakenAsBuilt(t *testing.T) {
	for _, s := range scripts {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			killed := e.start(s)
			e.awaitBlocked(killed)
			syscall.Kill(-killed.cmd.Process.Pid, syscall.SIGKILL)
			<-killed.done
			dir := filepath.Join(e.cache, s.dir)
			if _, err := os.Stat(filepath.Join(dir, s.artifact)); err == nil {
				t.Fatalf("the killed run left %s", s.artifact)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".tmp.*")); len(left) == 0 {
				t.Fatalf("the killed run left no temporary name in %s: it was not stopped halfway", dir)
			}
			next := e.start(s)
			next.wait(t)
			e.checkBuilds(merge(s.builds, map[string]int{s.block: 1}))
			e.checkComplete(s)
		})
	}
}

// TestScripts_ASecondRunOnlyChecks: with everything cached, a run builds nothing and prints the same.
func TestScripts_ASecondRunOnlyChecks(t *testing.T) {
	for _, s := range scripts {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s.block = ""
			first := e.start(s)
			first.wait(t)
			again := e.start(s)
			again.wait(t)
			if a, b := first.stdout.String(), again.stdout.String(); a != b {
				t.Errorf("the runs printed %q and %q", a, b)
			}
			if strings.TrimSpace(again.stderr.String()) != "" {
				t.Errorf("the second run said %q, want nothing", again.stderr)
			}
			e.checkBuilds(s.builds)
			e.checkComplete(s)
		})
	}
}
