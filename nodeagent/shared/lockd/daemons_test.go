package lockd

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/testtier"
)

// These tests run the real sanlock and lvmlockd. Each test gets its own "host": private mount and network
// namespaces with their own /run and /var/log (tmpfs), entered through the runner's prefix exactly as the agent enters the
// host's namespaces. The daemons insist on /run/sanlock, /run/lvm and /run/lvmlockd.pid; the namespace keeps
// them apart from the machine's and from the other tests', so the tests run in parallel.

// TestMain removes the setrlimit shim some machines need (see sanlockEnv).
func TestMain(m *testing.M) {
	code := m.Run()
	if shim.dir != "" {
		_ = os.RemoveAll(shim.dir)
	}
	os.Exit(code)
}

func TestAgentStartsBothLockManagersWhenTheHostRunsNone(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if res := h.run(t, "lvm", append([]string{"vgs"}, LVMConfig(7)...)...); !strings.Contains(string(res.Stderr), "lvmlockd process is not running") {
		t.Fatalf("before the Supervisor runs, lvm should miss lvmlockd; vgs said: %s", res.Stderr)
	}
	s, stop := h.supervise(t, 7)
	st := waitStatus(t, s, "both lock managers running in mode Agent", func(st Status) bool {
		return st.Mode == ModeAgent && st.Sanlock.Running && st.Lvmlockd.Running
	})

	if res := h.run(t, "lvmlockctl", "--info"); res.ExitCode != 0 {
		t.Errorf("lvmlockctl --info: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if res := h.run(t, "sanlock", "client", "status"); res.ExitCode != 0 {
		t.Errorf("sanlock client status: exit %d: %s", res.ExitCode, res.Stderr)
	}
	// lvm finds lvmlockd through --config alone; the host's lvm.conf is untouched.
	if res := h.run(t, "lvm", append([]string{"vgs"}, LVMConfig(7)...)...); strings.Contains(string(res.Stderr), "lvmlockd process is not running") {
		t.Errorf("lvm with LVMConfig does not find the running lvmlockd: %s", res.Stderr)
	}
	for name, ds := range map[string]DaemonStatus{"sanlock": st.Sanlock, "lvmlockd": st.Lvmlockd} {
		if pids := h.pids(t, name); !ds.Managed || len(pids) != 1 || pids[0] != ds.PID {
			t.Errorf("%s: status %+v, processes %v: want one, started by the agent, with the reported PID", name, ds, pids)
		}
	}
	if cmdline := h.cmdline(t, st.Lvmlockd.PID); !strings.Contains(cmdline, "--host-id 7") {
		t.Errorf("lvmlockd runs as %q, want --host-id 7", cmdline)
	}
	// No watchdog here: the status says plainly that there is no fencing.
	if st.HostID != 7 || st.Watchdog || st.Fencing != FencingOff || st.Wdmd.Running {
		t.Errorf("status %+v: want host ID 7, no watchdog, Fencing %q, no wdmd", st, FencingOff)
	}
	if err := s.SetHostID(8); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("SetHostID(8) while running: %v, want a refusal", err)
	}

	stop()
	if st := s.Status(); st.Mode != ModeNotRunning || st.Sanlock.Running || st.Lvmlockd.Running {
		t.Errorf("after ctx ended: %+v, want NotRunning", st)
	}
	h.expectNone(t, "after ctx ended")
}

func TestAgentRestartsAKilledLvmlockd(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s, _ := h.supervise(t, 11)
	st := waitStatus(t, s, "lvmlockd running", func(st Status) bool { return st.Lvmlockd.Running })
	old := st.Lvmlockd.PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatalf("kill lvmlockd: %v", err)
	}
	st = waitStatus(t, s, "lvmlockd restarted", func(st Status) bool {
		return st.Lvmlockd.Restarts == 1 && st.Lvmlockd.Running && st.Lvmlockd.PID != old
	})
	if res := h.run(t, "lvmlockctl", "--info"); res.ExitCode != 0 {
		t.Errorf("lvmlockctl --info after the restart: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if pids := h.pids(t, "lvmlockd"); len(pids) != 1 || pids[0] != st.Lvmlockd.PID {
		t.Errorf("lvmlockd processes %v, want only the restarted %d", pids, st.Lvmlockd.PID)
	}
	if st.Sanlock.Restarts != 0 || st.Lvmlockd.LastError != "" {
		t.Errorf("status %+v: want sanlock untouched and no error left once lvmlockd answers again", st)
	}
}

func TestSecondSupervisorUsesTheRunningLockManagers(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	first, stopFirst := h.supervise(t, 3)
	waitStatus(t, first, "the first supervisor's daemons running", func(st Status) bool {
		return st.Sanlock.Running && st.Lvmlockd.Running
	})
	second, stopSecond := h.supervise(t, 3)
	st := waitStatus(t, second, "the second supervisor in mode Host", func(st Status) bool {
		return st.Mode == ModeHost && st.Sanlock.Running && st.Lvmlockd.Running
	})
	if st.Sanlock.Managed || st.Lvmlockd.Managed || st.Watchdog || st.Fencing != FencingOff {
		t.Errorf("second supervisor's status %+v: want daemons it did not start, no watchdog", st)
	}
	h.expectOneEach(t, "with two supervisors")

	stopSecond() // stops nothing: it started nothing
	h.expectOneEach(t, "after the second supervisor stopped")
	if res := h.run(t, "lvmlockctl", "--info"); res.ExitCode != 0 {
		t.Errorf("lvmlockctl --info after the second supervisor stopped: exit %d", res.ExitCode)
	}
	stopFirst()
	h.expectNone(t, "after both stopped")
}

func TestTwoSupervisorsStartingTogetherStartOneInstanceOfEach(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	a, _ := h.supervise(t, 4)
	b, _ := h.supervise(t, 4)
	both := func(st Status) bool { return st.Sanlock.Running && st.Lvmlockd.Running }
	sa := waitStatus(t, a, "supervisor a's lock managers running", both)
	sb := waitStatus(t, b, "supervisor b's lock managers running", both)
	if modes := []Mode{sa.Mode, sb.Mode}; !slices.Contains(modes, ModeAgent) || !slices.Contains(modes, ModeHost) {
		t.Errorf("modes %v: want one supervisor in mode Agent (the lock file's holder), the other in mode Host", modes)
	}
	h.expectOneEach(t, "with two supervisors started together")
}

func TestHostModeWatchesTheHostsDaemonsAndReportsAStop(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	sanlock := h.startHostDaemon(t, "sanlock", newSanlock(false, 0).args...)
	h.await(t, sanlockStatus)
	lvmlockd := h.startHostDaemon(t, "lvmlockd", newLvmlockd(5, 0).args...)
	h.await(t, lvmlockdStatus)

	s, stop := h.supervise(t, 5)
	st := waitStatus(t, s, "mode Host", func(st Status) bool {
		return st.Mode == ModeHost && st.Sanlock.Running && st.Lvmlockd.Running
	})
	if st.Sanlock.Managed || st.Lvmlockd.Managed || st.Lvmlockd.PID != 0 {
		t.Errorf("status %+v: want the host's daemons, not managed", st)
	}

	stopHostDaemon(t, lvmlockd)
	st = waitStatus(t, s, "lvmlockd reported stopped", func(st Status) bool { return !st.Lvmlockd.Running })
	if !strings.Contains(st.Lvmlockd.LastError, "lvmlockd stopped answering") || st.Mode != ModeHost {
		t.Errorf("status %+v: want mode Host and lvmlockd's LastError saying it stopped answering", st)
	}
	if pids := h.pids(t, "lvmlockd"); len(pids) != 0 {
		t.Errorf("lvmlockd processes %v: in mode Host the agent starts none", pids)
	}

	stop()
	if sanlock.exited() {
		t.Error("the host's sanlock stopped with the supervisor, which did not start it")
	}
	if res := h.run(t, "sanlock", "client", "status"); res.ExitCode != 0 {
		t.Errorf("the host's sanlock no longer answers after the supervisor stopped: %s", res.Stderr)
	}
}

// testHost is a pair of private mount and network namespaces standing in for a node's host.
type testHost struct {
	keeper *exec.Cmd // holds the namespace
	dir    string    // lock file and (absent) watchdog device
	runner lvm.Runner
}

func newTestHost(t *testing.T) *testHost {
	t.Helper()
	testtier.Needs(t, "root on the host (sanlock, lvmlockd, mount namespaces)")
	if os.Geteuid() != 0 {
		testtier.Unavailable(t, "the lock manager tests need root (sanlock, lvmlockd, mount namespaces)")
	}
	for _, bin := range []string{"sanlock", "lvmlockd", "lvmlockctl", "lvm", "unshare", "nsenter", "pgrep"} {
		if _, err := exec.LookPath(bin); err != nil {
			testtier.Unavailablef(t, "%s is not installed (Debian packages sanlock, lvm2-lockd, lvm2, util-linux, procps)", bin)
		}
	}
	env := sanlockEnv(t)
	// Its own network namespace too: lvmlockctl --info binds an abstract socket, which is per network namespace.
	keeper := exec.Command("unshare", "--mount", "--net", "--propagation", "private", "sh", "-c",
		"mount -t tmpfs tmpfs /run && mkdir -p /run/lvm /run/lock && mount -t tmpfs tmpfs /var/log && echo ready && exec sleep infinity")
	out, err := keeper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	keeper.Stderr = os.Stderr
	if err := keeper.Start(); err != nil {
		t.Fatalf("start the test host's namespace: %v", err)
	}
	h := &testHost{keeper: keeper, dir: t.TempDir(), runner: lvm.Runner{
		// --pid as in production: nsenter then forks and the daemon is its child.
		Prefix: []string{"nsenter", "--target", strconv.Itoa(keeper.Process.Pid), "--mount", "--net", "--pid", "--"},
		Env:    env,
	}}
	t.Cleanup(func() {
		// The supervisors' cleanups ran before this one: nothing may be left. Kill what is, then the namespace.
		h.expectNone(t, "at the end of the test")
		for _, pid := range h.pids(t, "") {
			if pid != keeper.Process.Pid {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = keeper.Process.Kill()
		_ = keeper.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("the test host's namespace did not come up (mount tmpfs on /run needs CAP_SYS_ADMIN): %q, %v", line, err)
	}
	return h
}

// supervise runs a Supervisor on the host until the returned stop (also a cleanup) ends it.
func (h *testHost) supervise(t *testing.T, hostID int) (*Supervisor, func()) {
	t.Helper()
	s, err := New(Options{
		Runner:         h.runner,
		HostID:         hostID,
		Backoff:        wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 10, Cap: time.Second},
		WatchInterval:  50 * time.Millisecond,
		LockFile:       filepath.Join(h.dir, "lockd.lock"),
		WatchdogDevice: filepath.Join(h.dir, "no-watchdog"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(2 * time.Minute): // a bound for a hung stop, not a timing assertion
				t.Errorf("Run did not return after its context ended; status %+v", s.Status())
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

// waitStatus waits until the supervisor's status satisfies ok, and returns it.
func waitStatus(t *testing.T, s *Supervisor, what string, ok func(Status) bool) Status {
	t.Helper()
	var st Status
	waitFor(t, what, func() bool { st = s.Status(); return ok(st) })
	return st
}

// waitFor polls cond; the bound only catches a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// run runs a command on the test host.
func (h *testHost) run(t *testing.T, name string, args ...string) lvm.Result {
	t.Helper()
	r := h.runner
	r.Timeout = time.Minute
	res, err := r.Execute(t.Context(), name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return res
}

// await waits until a status command answers on the test host.
func (h *testHost) await(t *testing.T, status []string) {
	t.Helper()
	waitFor(t, strings.Join(status, " "), func() bool { return h.run(t, status[0], status[1:]...).ExitCode == 0 })
}

// pids lists the host's processes named name (all of them for ""), with pgrep --ns.
func (h *testHost) pids(t *testing.T, name string) []int {
	t.Helper()
	args := []string{"--ns", strconv.Itoa(h.keeper.Process.Pid), "--nslist", "mnt"}
	if name != "" {
		args = append(args, "-x", name)
	}
	out, err := exec.Command("pgrep", args...).Output()
	if err != nil && len(out) == 0 {
		return nil // pgrep exits 1 when nothing matches
	}
	var pids []int
	for f := range strings.FieldsSeq(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (h *testHost) expectNone(t *testing.T, when string) {
	t.Helper()
	for _, name := range []string{"sanlock", "lvmlockd", "wdmd"} {
		if pids := h.pids(t, name); len(pids) != 0 {
			t.Errorf("%s: %s still runs (pids %v)", when, name, pids)
		}
	}
}

func (h *testHost) expectOneEach(t *testing.T, when string) {
	t.Helper()
	for _, name := range []string{"sanlock", "lvmlockd"} {
		if pids := h.pids(t, name); len(pids) != 1 {
			t.Errorf("%s: %d %s processes %v, want exactly one", when, len(pids), name, pids)
		}
	}
}

func (h *testHost) cmdline(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("read pid %d's command line: %v", pid, err)
	}
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// startHostDaemon starts a daemon as the host's own (not through a Supervisor); the test stops it.
func (h *testHost) startHostDaemon(t *testing.T, name string, args ...string) *process {
	t.Helper()
	p, err := startProcess(h.runner, name, args)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopHostDaemon(t, p) })
	return p
}

// stopHostDaemon stops a daemon the test started, and waits until its whole process group is gone.
func stopHostDaemon(t *testing.T, p *process) {
	t.Helper()
	s, err := New(Options{HostID: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.stop(&daemon{name: "the test's daemon"}, p)
}

// shim is a preload library that lets sanlock start where raising resource limits is not allowed.
var shim struct {
	once sync.Once
	dir  string
	err  error
}

const shimSource = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/resource.h>
/* sanlock raises RLIMIT_MEMLOCK and RLIMIT_RTPRIO to unlimited at start and exits when that fails. */
int setrlimit(__rlimit_resource_t r, const struct rlimit *l) {
	int (*real)(__rlimit_resource_t, const struct rlimit *) = dlsym(RTLD_NEXT, "setrlimit");
	int rv = real(r, l);
	return rv < 0 && errno == EPERM ? 0 : rv;
}
`

// sanlockEnv is the environment the daemons need on this machine. sanlock sets RLIMIT_MEMLOCK and
// RLIMIT_RTPRIO to unlimited at start, which needs CAP_SYS_RESOURCE (a privileged pod has it) or unlimited
// hard limits; in a sandbox without either, the daemons run with a preload shim that ignores that refusal.
func sanlockEnv(t *testing.T) []string {
	t.Helper()
	if canRaiseLimits() {
		return nil
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testtier.Unavailable(t, "sanlock cannot raise RLIMIT_MEMLOCK here (no CAP_SYS_RESOURCE, limited hard limit), "+
			"and gcc, to build the test's setrlimit shim, is not installed (Debian package gcc)")
	}
	shim.once.Do(func() {
		if shim.dir, shim.err = os.MkdirTemp("", "lockd-shim-"); shim.err != nil {
			return
		}
		src := filepath.Join(shim.dir, "shim.c")
		if shim.err = os.WriteFile(src, []byte(shimSource), 0o600); shim.err != nil {
			return
		}
		out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", filepath.Join(shim.dir, "shim.so"), src, "-ldl").CombinedOutput()
		if err != nil {
			shim.err = fmt.Errorf("build the setrlimit shim: %v: %s", err, out)
		}
	})
	if shim.err != nil {
		t.Fatal(shim.err)
	}
	return []string{"LD_PRELOAD=" + filepath.Join(shim.dir, "shim.so")}
}

// canRaiseLimits tells whether a process started from here may set RLIMIT_MEMLOCK and RLIMIT_RTPRIO to
// unlimited: it has CAP_SYS_RESOURCE, or both hard limits are unlimited already.
func canRaiseLimits() bool {
	const capSysResource = 24
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				if caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && caps&(1<<capSysResource) != 0 {
					return true
				}
			}
		}
	}
	for _, r := range []int{unix.RLIMIT_MEMLOCK, unix.RLIMIT_RTPRIO} {
		var l unix.Rlimit
		if err := unix.Getrlimit(r, &l); err != nil || l.Max != unix.RLIM_INFINITY {
			return false
		}
	}
	return true
}
