package sandbox

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/buildcache"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/localvm"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/operator"
)

// BenchmarkMakeRun measures `make run` as a newcomer types it, in a fresh clone of this checkout's HEAD,
// the terminal's Ctrl-C being a SIGINT to make's process group:
//
//   - mode=real/cache=cold: a fresh machine as far as caches go — empty Go build and module caches and an
//     empty LVMS_CACHE (control plane, node programs, image packages, VM image all built or downloaded);
//     Debian's packages are already installed (this benchmark cannot uninstall them).
//   - mode=real/cache=warm: the same, a second time (one unmeasured run first fills the caches).
//   - mode=simulated/cache=warm: make run LOCAL_FLAGS=--simulated, after one unmeasured run.
//
// Metrics: make run started → the sandbox says it is up (s-to-demo: real mode only says so once the demo
// pod is Ready, and the benchmark then checks the pod's data is on a LogicalVolume; s-to-ready: the
// simulated sandbox up with every sample settled), the walkthrough's claim applied → Bound (s-claim-bound,
// simulated), and Ctrl-C → make has exited (s-to-stop) with no process, loop device, mount or volume group
// of the sandbox left. Each iteration is a whole sandbox.
//
// Under make test's smoke (benchsmoke) only the simulated sandbox runs, once, without the unmeasured run
// before it and in a clone at the same path each time (cloneHead): the real ones take tens of minutes of
// node VMs under emulation.
func BenchmarkMakeRun(b *testing.B) {
	loopdev.RequireRoot(b)
	if benchsmoke.On() {
		b.Run("mode=simulated/cache=warm", benchSimulated)
		return
	}
	b.Run("mode=real/cache=cold", func(b *testing.B) {
		requireRealNodes(b)
		var up, stop time.Duration
		for range b.N {
			env := coldEnv(b.TempDir())
			r := makeRun(b, cloneHead(b), env, "")
			up += r.up
			stop += r.stop
		}
		b.ReportMetric(up.Seconds()/float64(b.N), "s-to-demo")
		b.ReportMetric(stop.Seconds()/float64(b.N), "s-to-stop")
	})
	b.Run("mode=real/cache=warm", func(b *testing.B) {
		requireRealNodes(b)
		clone := cloneHead(b)
		makeRun(b, clone, os.Environ(), "") // fills the caches and the clone's bin/
		var up, stop time.Duration
		for range b.N {
			r := makeRun(b, clone, os.Environ(), "")
			up += r.up
			stop += r.stop
		}
		b.ReportMetric(up.Seconds()/float64(b.N), "s-to-demo")
		b.ReportMetric(stop.Seconds()/float64(b.N), "s-to-stop")
	})
	b.Run("mode=simulated/cache=warm", benchSimulated)
}

// benchSimulated measures make run LOCAL_FLAGS=--simulated, after one unmeasured run (none under the smoke).
func benchSimulated(b *testing.B) {
	clone := cloneHead(b)
	if !benchsmoke.On() {
		makeRun(b, clone, os.Environ(), "--simulated")
	}
	var up, bound, stop time.Duration
	for range b.N {
		r := makeRun(b, clone, os.Environ(), "--simulated")
		up += r.up
		bound += r.bound
		stop += r.stop
	}
	n := float64(b.N)
	b.ReportMetric(up.Seconds()/n, "s-to-ready")
	b.ReportMetric(bound.Seconds()/n, "s-claim-bound")
	b.ReportMetric(stop.Seconds()/n, "s-to-stop")
}

func requireRealNodes(b *testing.B) {
	if reason := localvm.Unavailable(); reason != "" {
		b.Skipf("real nodes cannot run: %s", reason)
	}
}

// coldEnv is this process's environment with every cache make run fills moved to empty directories
// under dir.
func coldEnv(dir string) []string {
	env := os.Environ()
	for _, v := range []string{"LVMS_CACHE", "GOCACHE", "GOMODCACHE"} {
		env = append(env, v+"="+filepath.Join(dir, strings.ToLower(v)))
	}
	// The module cache is read-only as go writes it; writable, the benchmark's clean-up can remove it.
	return append(env, "GOFLAGS=-modcacherw")
}

// cloneHead clones the checkout's HEAD as a newcomer would get it: only what is committed. Under the smoke
// the clone is made afresh at one path per checkout (under LVMS_CACHE, held under its lock until the
// benchmark ends), so that Go's build cache, which keys this module's packages by their directory, still
// holds them from the last smoke: the smoke proves make run completes, not how long a first build takes.
func cloneHead(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "lvms")
	if benchsmoke.On() {
		dir = smokeCloneDir(b)
	}
	if out, err := exec.Command("git", "clone", "--quiet", testenv.RepoRoot(), dir).CombinedOutput(); err != nil {
		b.Fatalf("git clone: %v\n%s", err, out)
	}
	return dir
}

// smokeCloneDir is the smoke's path for the clone, emptied and locked until the benchmark ends.
func smokeCloneDir(b *testing.B) string {
	b.Helper()
	cache, err := buildcache.Dir()
	if err != nil {
		b.Fatal(err)
	}
	parent := filepath.Join(cache, "bench-smoke", fmt.Sprintf("%x", sha256.Sum256([]byte(testenv.RepoRoot())))[:12])
	unlock, err := buildcache.Lock(context.Background(), parent, os.Stderr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(unlock)
	dir := filepath.Join(parent, "lvms")
	if err := os.RemoveAll(dir); err != nil {
		b.Fatalf("remove the last smoke's clone: %v", err)
	}
	return dir
}

type makeRunResult struct{ up, bound, stop time.Duration }

// makeRun runs make run in dir with env and LOCAL_FLAGS flags (and its own state directory), waits for the
// sandbox to say it is up, checks what it promises, then types Ctrl-C and checks nothing is left.
func makeRun(b *testing.B, dir string, env []string, flags string) makeRunResult {
	b.Helper()
	state := b.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "run",
		"LOCAL_FLAGS="+strings.TrimSpace(flags+" --state-dir "+state+" --console-listen 127.0.0.1:0"))
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's foreground group, as Ctrl-C reaches it
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	began := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	b.Cleanup(func() { // whatever a failed iteration left running
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if procs, _ := Processes(state); len(procs) > 0 {
			for _, p := range procs {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})
	out := &tailLog{}
	upLine := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			out.add(sc.Text())
			if strings.HasPrefix(sc.Text(), "The sandbox is up") {
				once.Do(func() { close(upLine) })
			}
		}
	}()
	select {
	case <-upLine:
	case err := <-exited:
		b.Fatalf("make run %s ended before the sandbox was up: %v\n%s", flags, err, out)
	case <-time.After(75 * time.Minute):
		b.Fatalf("make run %s: not up after 75 minutes\n%s", flags, out)
	}
	r := makeRunResult{up: time.Since(began)}
	c := sandboxClient(b, state)
	if strings.Contains(flags, "--simulated") {
		settle, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := WaitSettled(settle, c, "openshift-storage")
		cancel()
		if err != nil {
			b.Fatalf("samples not settled: %v", err)
		}
		r.up = time.Since(began)
		applied := time.Now()
		applyClaim(b, c)
		waitBound(b, c, "default", "data")
		r.bound = time.Since(applied)
	} else {
		demoOnLV(b, c)
	}

	interrupted := time.Now()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		b.Fatal(err)
	}
	select {
	case <-exited: // make reports the interrupt with a non-zero status: what counts is what is left
	case <-time.After(5 * time.Minute):
		b.Fatalf("make run %s: still running 5 minutes after Ctrl-C\n%s", flags, out)
	}
	r.stop = time.Since(interrupted)
	if !strings.Contains(out.String(), "Stopped; nothing left behind.") {
		b.Errorf("make run %s: the stop did not end cleanly\n%s", flags, out)
	}
	if procs, err := Processes(state); err != nil || len(procs) > 0 {
		b.Errorf("after Ctrl-C these still run: %v (%v)", procs, err)
	}
	// The sandbox's volume groups live on its loop devices, so none is left once they are gone; the host's
	// other volume groups (other tests') come and go meanwhile.
	if loops, err := loopsUnder(context.Background(), state); err != nil || len(loops) > 0 {
		b.Errorf("after Ctrl-C these loop devices are left: %v, with the volume groups %q (%v)", loops, volumeGroupsOn(loops), err)
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mounts), state) {
		b.Errorf("after Ctrl-C something is still mounted under %s (%v)", state, err)
	}
	return r
}

func sandboxClient(b *testing.B, state string) client.Client {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", KubeconfigPath(state))
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// demoOnLV checks what the real sandbox says when it is up: the demo's claim is Bound and its volume is a
// LogicalVolume the node agent created (its status names the LV).
func demoOnLV(b *testing.B, c client.Client) {
	b.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "data-writer-0"}, pvc); err != nil || pvc.Status.Phase != corev1.ClaimBound {
		b.Fatalf("the demo's claim is not Bound: %v %s", err, pvc.Status.Phase)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil || pv.Spec.CSI == nil {
		b.Fatalf("the demo's PersistentVolume %s: %v", pvc.Spec.VolumeName, err)
	}
	lvs := &topolvmv1.LogicalVolumeList{}
	if err := c.List(ctx, lvs); err != nil {
		b.Fatal(err)
	}
	for _, lv := range lvs.Items {
		if lv.Status.VolumeID == pv.Spec.CSI.VolumeHandle {
			return
		}
	}
	b.Fatalf("no LogicalVolume has the demo's volume %s", pv.Spec.CSI.VolumeHandle)
}

// applyClaim applies the simulated walkthrough's claim and pod.
func applyClaim(b *testing.B, c client.Client) {
	b.Helper()
	objs, err := DecodeFile(filepath.Join(testenv.RepoRoot(), "sandbox", "testdata", "claim.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			b.Fatal(err)
		}
	}
}

func waitBound(b *testing.B, c client.Client, namespace, name string) {
	b.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pvc)
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, nil
	}); err != nil {
		b.Fatalf("claim %s/%s is not Bound: %v", namespace, name, err)
	}
}

// volumeGroupsOn is the volume groups on devices, as pvs lists them (what it says when it cannot).
func volumeGroupsOn(devices []string) string {
	if len(devices) == 0 {
		return ""
	}
	out, err := exec.Command("pvs", append([]string{"--noheadings", "-o", "vg_name"}, devices...)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("pvs: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.Join(strings.Fields(string(out)), " ")
}

// tailLog keeps the last lines of make run's output for a failure's report.
type tailLog struct {
	mu    sync.Mutex
	lines []string
}

func (t *tailLog) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 200 {
		t.lines = t.lines[len(t.lines)-200:]
	}
}

func (t *tailLog) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("(last %d lines)\n%s", len(t.lines), strings.Join(t.lines, "\n"))
}
