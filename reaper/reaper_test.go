package reaper_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/reaper"
	"github.com/lvms-dev/lvms/testtier"
)

// helperEnv, when set, makes the test binary one of these tests' helper processes: "<mode>:<dir>", where
// dir is the helper's directory (status file, mount point) in the starting test's temporary directory.
const helperEnv = "LVMS_REAPER_TEST_HELPER"

// Bounds of the waits (polling, never a fixed sleep): helperBound ends a helper that is never killed (its
// watchdog then cleans up after it too), readyBound is how long a helper may take to report its state
// (starting a control plane on a busy two-core machine takes half a minute), goneBound how long the
// watchdog may take to end and remove what the helper left.
const (
	helperBound = 10 * time.Minute
	readyBound  = 3 * time.Minute
	goneBound   = time.Minute
	pollEvery   = 20 * time.Millisecond
)

// A test binary killed with SIGKILL, and one that exits leaving a process and a path behind: its watchdog
// kills its processes — a child in a session of its own (as envtest's and localcluster's components run)
// and that child's child, reparented when its parent dies — removes the paths still registered and keeps
// the one forgotten, leaves alone a process the binary did not start, and says what it did.
func TestWatchdog_EndsWhatTheBinaryLeft(t *testing.T) {
	if mode, dir, ok := helperMode(); ok {
		leaveProcessesAndPaths(t, mode, dir)
		return
	}
	for _, mode := range []string{"killed", "exited"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			bystander := exec.Command("sleep", "600") // the test's own: no helper's watchdog may end it
			if err := bystander.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = bystander.Process.Kill(); _ = bystander.Wait() })
			bystanderStart := mustStart(t, bystander.Process.Pid)

			h := startHelper(t, mode, dir)
			var st struct{ Child, Grandchild int }
			h.status(&st)
			procs := map[string]int{"child": st.Child, "grandchild": st.Grandchild}
			starts := map[string]string{}
			for name, pid := range procs {
				starts[name] = mustStart(t, pid)
			}
			t.Cleanup(func() { // when the watchdog failed
				for name, pid := range procs {
					if alive(pid, starts[name]) {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			if mode == "killed" {
				h.kill()
			} else if err := os.WriteFile(filepath.Join(dir, "proceed"), nil, 0o644); err != nil {
				t.Fatal(err) // the helper exits once the test knows its processes
			}
			h.wait(mode == "exited")

			waitFor(t, "the watchdog to end the helper's processes and remove its path", goneBound, func() []string {
				var left []string
				for name, pid := range procs {
					if alive(pid, starts[name]) {
						left = append(left, fmt.Sprintf("%s (pid %d) still running", name, pid))
					}
				}
				if _, err := os.Lstat(filepath.Join(dir, "leftover")); err == nil {
					left = append(left, filepath.Join(dir, "leftover")+" still there")
				}
				return left
			}, h.log)
			if _, err := os.Stat(filepath.Join(dir, "forgotten")); err != nil {
				t.Errorf("a path the helper had the watchdog forget is gone: %v", err)
			}
			if !alive(bystander.Process.Pid, bystanderStart) {
				t.Errorf("the test's own process (pid %d) was ended by the helper's watchdog", bystander.Process.Pid)
			}
			report := h.report(t)
			t.Logf("the watchdog's report: %s", report)
			for name, pid := range procs {
				if want := fmt.Sprintf("killed sleep (pid %d)", pid); !strings.Contains(report, want) {
					t.Errorf("the watchdog's report does not say %q (the %s):\n%s", want, name, report)
				}
			}
			if want := "removed " + filepath.Join(dir, "leftover"); !strings.Contains(report, want) {
				t.Errorf("the watchdog's report does not say %q:\n%s", want, report)
			}
		})
	}
}

// leaveProcessesAndPaths is the helper of TestWatchdog_EndsWhatTheBinaryLeft: it starts a child in a
// session of its own that starts a child of its own, registers two paths and forgets one, reports, and
// then is killed or ends (passing) without cleaning up.
func leaveProcessesAndPaths(t *testing.T, mode, dir string) {
	if err := reaper.Start(); err != nil {
		t.Fatal(err)
	}
	grandchild := filepath.Join(dir, "grandchild.pid")
	child := exec.Command("sh", "-c", `sleep 600 & echo $! > "$1"; exec sleep 600`, "sh", grandchild)
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"leftover", "forgotten"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := reaper.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := reaper.Forget(filepath.Join(dir, "forgotten")); err != nil {
		t.Fatal(err)
	}
	var gc int
	waitFor(t, "the child to report its own child, both running sleep", readyBound, func() []string {
		b, err := os.ReadFile(grandchild)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return []string{fmt.Sprintf("%s: %q, %v", grandchild, b, err)}
		}
		if gc, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return []string{err.Error()}
		}
		var left []string
		for _, pid := range []int{child.Process.Pid, gc} {
			if s, err := readStat(pid); err != nil || s.comm != "sleep" {
				left = append(left, fmt.Sprintf("pid %d: %+v, %v", pid, s, err))
			}
		}
		return left
	}, nil)
	writeStatus(t, dir, struct{ Child, Grandchild int }{child.Process.Pid, gc})
	if mode == "killed" {
		holdUntilKilled()
	}
	// "exited": once the starting test has read what it needs of the processes, the test passes and the
	// binary exits with them running and the path in place.
	waitFor(t, "the starting test to tell the helper to exit", readyBound, func() []string {
		if _, err := os.Stat(filepath.Join(dir, "proceed")); err != nil {
			return []string{err.Error()}
		}
		return nil
	}, nil)
}

// A test binary killed with SIGKILL while its control plane (e2e/testenv) runs and a loop device
// (nodeagent/loopdev) holds a mounted file system: its watchdog ends etcd and kube-apiserver, unmounts the
// file system, detaches the device and removes the control plane's directories (etcd's data, the API
// server's certificates, envtest's webhook serving certificates) and the loop device's.
func TestWatchdog_KilledBinaryLeavesNoControlPlaneOrLoopDevice(t *testing.T) {
	if mode, dir, ok := helperMode(); ok {
		holdControlPlaneAndLoopDevice(t, mode, dir)
		return
	}
	testtier.Needs(t, "root and a control plane (kube-apiserver and etcd)")
	loopdev.RequireRoot(t)
	for _, bin := range []string{"mkfs.ext4", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			testtier.Unavailablef(t, "this test needs %s (Debian packages e2fsprogs, mount): %v", bin, err)
		}
	}
	if _, err := testenv.Assets(); err != nil {
		testtier.Unavailablef(t, "this test needs kube-apiserver and etcd: %v", err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "mnt"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, "killed", dir)
	var st controlPlaneStatus
	h.status(&st)

	// What the helper holds, found independently of what it reported where possible.
	kids := children(t, h.cmd.Process.Pid)
	procs := map[string]int{}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		pid, ok := kids[name]
		if !ok {
			t.Fatalf("no %s among the helper's processes %v", name, kids)
		}
		procs[name] = pid
	}
	starts := map[string]string{}
	for name, pid := range procs {
		starts[name] = mustStart(t, pid)
	}
	if got := backingFile(st.Device); got != st.BackingFile {
		t.Fatalf("%s is backed by %q, the helper attached %q", st.Device, got, st.BackingFile)
	}
	if src, ok := mountSource(st.Mount); !ok || src != st.Device {
		t.Fatalf("%s is mounted from %q (mounted: %v), the helper mounted %s", st.Mount, src, ok, st.Device)
	}
	paths := append([]string{st.DiskDir}, st.Dirs...)
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the helper's %s: %v", p, err)
		}
	}
	if !slices.ContainsFunc(st.Dirs, func(d string) bool { return strings.HasPrefix(filepath.Base(d), "envtest-serving-certs-") }) {
		t.Fatalf("the control plane's directories %v hold no envtest serving certificates directory", st.Dirs)
	}
	t.Cleanup(func() { // when the watchdog failed; runs before t.TempDir's removal, so nothing is mounted then
		for name, pid := range procs {
			if alive(pid, starts[name]) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if _, ok := mountSource(st.Mount); ok {
			_ = syscall.Unmount(st.Mount, syscall.MNT_DETACH)
		}
		if backingFile(st.Device) == st.BackingFile {
			_ = exec.Command("losetup", "-d", st.Device).Run()
		}
		for _, p := range paths {
			_ = os.RemoveAll(p)
		}
	})

	h.kill()
	h.wait(false)
	waitFor(t, "the watchdog to end the control plane and free the loop device", goneBound, func() []string {
		var left []string
		for name, pid := range procs {
			if alive(pid, starts[name]) {
				left = append(left, fmt.Sprintf("%s (pid %d) still running", name, pid))
			}
		}
		if _, ok := mountSource(st.Mount); ok {
			left = append(left, st.Mount+" still mounted")
		}
		if backingFile(st.Device) == st.BackingFile {
			left = append(left, st.Device+" still attached to "+st.BackingFile)
		}
		for _, p := range paths {
			if _, err := os.Lstat(p); err == nil {
				left = append(left, p+" still there")
			}
		}
		return left
	}, h.log)
	t.Logf("the watchdog's report: %s", h.report(t))
}

// controlPlaneStatus is what holdControlPlaneAndLoopDevice reports.
type controlPlaneStatus struct {
	Device, BackingFile, Mount, DiskDir string
	Dirs                                []string // the control plane's
}

// holdControlPlaneAndLoopDevice is the helper of TestWatchdog_KilledBinaryLeavesNoControlPlaneOrLoopDevice:
// it starts a control plane, attaches a loop device, mounts a file system from it, reports, and waits to
// be killed.
func holdControlPlaneAndLoopDevice(t *testing.T, _, dir string) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	disks := loopdev.Dir(t)
	dev := loopdev.Attach(t, disks, 64<<20, false)
	loopdev.Run(t, "mkfs.ext4", "-q", dev)
	mnt := filepath.Join(dir, "mnt")
	loopdev.Run(t, "mount", dev, mnt)
	writeStatus(t, dir, controlPlaneStatus{Device: dev, BackingFile: backingFile(dev), Mount: mnt, DiskDir: disks, Dirs: env.Dirs()})
	holdUntilKilled()
}

// helperMode tells whether this process is a helper, and its mode and directory.
func helperMode() (mode, dir string, ok bool) {
	mode, dir, ok = strings.Cut(os.Getenv(helperEnv), ":")
	return mode, dir, ok
}

// holdUntilKilled waits for the starting test to kill this helper, at most helperBound.
func holdUntilKilled() { <-time.After(helperBound) }

// writeStatus writes a helper's state for the starting test, whole (written, then renamed).
func writeStatus(t *testing.T, dir string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status.tmp"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "status.tmp"), filepath.Join(dir, "status.json")); err != nil {
		t.Fatal(err)
	}
}

// helper is a helper process: this test binary, running the calling test in the helper's role.
type helper struct {
	t    *testing.T
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startHelper runs this test binary with the calling test alone, as a helper in mode; its output goes to a
// file (so waiting for it never waits for its watchdog, which inherits that output). The helper is killed
// when the test ends, should it still run.
func startHelper(t *testing.T, mode, dir string) *helper {
	t.Helper()
	name, _, _ := strings.Cut(t.Name(), "/")
	out, err := os.Create(filepath.Join(dir, "helper.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode+":"+dir)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{t: t, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { h.err = cmd.Wait(); close(h.done) }()
	t.Cleanup(func() { h.kill(); <-h.done })
	return h
}

// status waits for the helper's status file and reads it into v; it fails the test if the helper ends
// first or takes longer than readyBound.
func (h *helper) status(v any) {
	h.t.Helper()
	var b []byte
	waitFor(h.t, "the helper to report its state", readyBound, func() []string {
		var err error
		if b, err = os.ReadFile(filepath.Join(h.dir, "status.json")); err == nil {
			return nil
		}
		select {
		case <-h.done:
			h.t.Fatalf("the helper ended without reporting its state: %v\n%s", h.err, h.log())
		default:
		}
		return []string{err.Error()}
	}, h.log)
	if err := json.Unmarshal(b, v); err != nil {
		h.t.Fatalf("helper status %s: %v", b, err)
	}
}

func (h *helper) kill() {
	select {
	case <-h.done:
	default:
		_ = h.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// wait waits for the helper to end (it was killed, or passes on its own), at most goneBound, and checks
// how it ended.
func (h *helper) wait(passes bool) {
	h.t.Helper()
	select {
	case <-h.done:
	case <-time.After(goneBound):
		h.t.Fatalf("the helper did not end within %v:\n%s", goneBound, h.log())
	}
	var ee *exec.ExitError
	switch {
	case passes && h.err != nil:
		h.t.Fatalf("the helper failed: %v\n%s", h.err, h.log())
	case !passes && (!errors.As(h.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL):
		h.t.Fatalf("the helper ended with %v, not killed by SIGKILL:\n%s", h.err, h.log())
	}
}

// log is what the helper and its watchdog wrote.
func (h *helper) log() string {
	b, err := os.ReadFile(filepath.Join(h.dir, "helper.log"))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// report waits for the watchdog's report line in the helper's output and returns it.
func (h *helper) report(t *testing.T) string {
	t.Helper()
	var line string
	waitFor(t, "the watchdog's report", goneBound, func() []string {
		for l := range strings.Lines(h.log()) {
			if strings.HasPrefix(l, "lvms test reaper: ") && strings.HasSuffix(l, "\n") {
				line = strings.TrimSpace(l)
				return nil
			}
		}
		return []string{"no report yet"}
	}, h.log)
	return line
}

// waitFor polls left, which names what is not yet as wanted, until it names nothing; past bound it fails
// the test with what is left and, when given, more.
func waitFor(t *testing.T, what string, bound time.Duration, left func() []string, more func() string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		l := left()
		if len(l) == 0 {
			return
		}
		if time.Now().After(deadline) {
			extra := ""
			if more != nil {
				extra = "\n" + more()
			}
			t.Fatalf("waiting for %s: %s%s", what, strings.Join(l, "; "), extra)
		}
		time.Sleep(pollEvery)
	}
}

// stat is a process's /proc/<pid>/stat: its name, state, parent and start time (clock ticks since boot,
// which with the ID tells the process from a later one given the same ID).
type stat struct {
	comm  string
	state byte
	ppid  int
	start string
}

func readStat(pid int) (stat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return stat{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return stat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return stat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return stat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return stat{comm: s[open+1 : end], state: f[0][0], ppid: ppid, start: f[19]}, nil
}

func mustStart(t *testing.T, pid int) string {
	t.Helper()
	s, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return s.start
}

// alive tells whether the process pid that started at start still runs (not a zombie).
func alive(pid int, start string) bool {
	s, err := readStat(pid)
	return err == nil && s.start == start && s.state != 'Z' && s.state != 'X'
}

// children maps the names of pid's child processes to their IDs.
func children(t *testing.T, pid int) map[string]int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readStat(child); err == nil && s.ppid == pid {
			out[s.comm] = child
		}
	}
	return out
}

// backingFile is the file loop device dev is attached to, "" when it is detached.
func backingFile(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// mountSource is the source of the file system mounted at point, and whether one is.
func mountSource(point string) (string, bool) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if len(f) > 4 && sep > 0 && sep+2 < len(f) && f[4] == point {
			return f[sep+2], true
		}
	}
	return "", false
}
