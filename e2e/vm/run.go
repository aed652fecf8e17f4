// This file is the test-facing side of the host: Run and RunMany re-execute the current test binary inside
// one or several VMs, so that a test function's `if vm.InGuest()` branch does the real work against a real
// kernel, and the host-side test passes or fails with it.

package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/e2e/testtimes"
	"github.com/lvms-dev/lvms/localvm"
	"github.com/lvms-dev/lvms/testtier"
)

// Run boots one VM and runs the current test inside it: the test binary is executed in the guest with
// -test.run matching exactly t.Name(), so the same test function takes its `if vm.InGuest()` branch there.
// Guest output streams to the test log. The test fails when the guest test fails, and is skipped (with
// the reason) only when qemu cannot run on this machine.
func Run(t *testing.T, opts Options) {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "vm"
	}
	RunMany(t, []Options{opts})
}

// RunMany boots one VM per element of opts at the same time, each running the current test, and waits for
// all of them. Each guest tells its part by Role(); they share a read-write directory (SharedDir) to
// coordinate through Signal and WaitSignal, and disks with the same Path. When a VM exits, the host records
// it in the shared directory so that peers waiting for it fail fast instead of timing out.
func RunMany(t *testing.T, opts []Options) {
	t.Helper()
	StartMany(t, opts).Wait()
}

// Running is VMs started by StartMany: the host side goes on with its part of the test (a guest that runs
// a node while the host drives the cluster, say) and coordinates with the guests through Signal and
// WaitSignal, as the guests do among themselves.
type Running struct {
	t        *testing.T
	machines *localvm.Machines
	consoles map[string]*testLog
	waited   bool
}

// StartMany is RunMany without the wait: it boots the VMs and returns. Call Wait before the test ends
// (it judges the guests); the VMs are killed at cleanup in any case.
func StartMany(t *testing.T, opts []Options) *Running {
	t.Helper()
	if InGuest() {
		t.Fatalf("vm.Run called inside the VM: %s needs an `if vm.InGuest() { ...; return }` branch before it", t.Name())
	}
	if len(opts) == 0 {
		t.Fatal("vm.RunMany: no VMs to run")
	}
	Require(t)
	if reason := localvm.Unavailable(); reason != "" {
		testtier.Unavailable(t, reason+": the real-kernel VM lane cannot run")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("find the test binary: %v", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatalf("find the working directory: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-15*time.Second))
		t.Cleanup(cancel)
	}
	vms := make([]Options, len(opts))
	for i, o := range opts {
		if o.Name == "" {
			o.Name = string(rune('a' + i))
		}
		vms[i] = o
	}
	pattern := testRunPattern(t.Name())
	r := &Running{t: t, consoles: map[string]*testLog{}}
	for _, o := range vms {
		if r.consoles[o.Name] != nil {
			t.Fatalf("vm.RunMany: two VMs named %q", o.Name)
		}
		r.consoles[o.Name] = &testLog{t: t, prefix: "[" + o.Name + "] "}
	}
	m, err := localvm.Boot(ctx, localvm.BootOptions{
		VMs: vms, Binary: exe, Dir: cwd, RunDir: t.TempDir(), Log: &testLog{t: t},
		Args:    func(_ Options, timeout time.Duration) []string { return testArgs(pattern, timeout) },
		Console: func(name string) io.Writer { return r.consoles[name] },
	})
	if errors.Is(err, localvm.ErrQemuCannotStart) {
		testtier.Unavailablef(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	r.machines = m
	return r
}

// Require skips the test under -short (make check): the VM lane is not part of the fast tier. StartMany,
// Run and RunMany call it before anything else; a test whose host side does more before it boots (builds a
// binary, starts a control plane) calls it first.
func Require(t testing.TB) {
	t.Helper()
	testtier.Needs(t, "the VM lane (Debian's kernel under qemu)")
}

// Kill powers VM name off at once, as a node that dies: its guest test is not judged.
func (r *Running) Kill(name string) {
	r.t.Helper()
	if err := r.machines.Kill(name); err != nil {
		r.t.Fatalf("vm.Running.Kill: %v", err)
	}
}

// Signal tells the guests name (their WaitSignal returns).
func (r *Running) Signal(name string) {
	r.t.Helper()
	if err := r.machines.Signal(name); err != nil {
		r.t.Fatal(err)
	}
}

// SharedDir is the host path of the guests' SharedDir.
func (r *Running) SharedDir() string { return r.machines.SharedDir() }

// WaitSignal waits until a guest signals name, failing early when a VM exits with an error first.
func (r *Running) WaitSignal(ctx context.Context, name string) error {
	return r.machines.WaitSignal(ctx, name)
}

// Wait waits for every VM to power off and judges each guest's test run: failed, skipped (the host test
// skips too) or passed. It returns at once when called again.
func (r *Running) Wait() {
	t := r.t
	t.Helper()
	if r.waited {
		return
	}
	r.waited = true
	if t.Failed() {
		// The host's part failed: guests waiting for its signals stop now instead of at their deadline.
		r.machines.HostFailed()
	}
	for _, res := range r.machines.Wait() {
		if res.Killed {
			t.Logf("VM %s: killed by the test; %s", res.Name, testtimes.VMCPUNote(res.Exit.CPU))
			continue
		}
		if res.Err != nil {
			t.Errorf("%v (%s)", res.Err, testtimes.VMCPUNote(res.Exit.CPU))
			continue
		}
		t.Logf("VM %s: guest command started %s after qemu, exited with %d after %s; %s",
			res.Name, res.Exit.Boot.Round(100*time.Millisecond), res.Exit.Code, res.Exit.Total.Round(100*time.Millisecond), testtimes.VMCPUNote(res.Exit.CPU))
		switch verdict := guestVerdict(r.consoles[res.Name].text(), t.Name(), res.Exit.Code); verdict {
		case "":
		case verdictSkip:
			testtier.Unavailablef(t, "the guest test skipped in VM %s (see its log above for what the guest lacks)", res.Name)
		default:
			t.Errorf("VM %s: %s", res.Name, verdict)
		}
	}
}

// verdictSkip is guestVerdict's answer when the guest test skipped.
const verdictSkip = "skip"

// guestVerdict judges a guest run from its console and exit code: "" when the test ran and passed,
// verdictSkip when it skipped, otherwise what went wrong. Exit code 0 alone is not enough: a -test.run
// pattern that matches nothing also exits 0.
func guestVerdict(console, name string, code int) string {
	q := regexp.QuoteMeta(name)
	switch {
	case code != 0:
		return fmt.Sprintf("the guest test failed (exit code %d, see its log above)", code)
	case regexp.MustCompile(`(?m)^\s*--- PASS: ` + q + ` \(`).MatchString(console):
		return ""
	case regexp.MustCompile(`(?m)^\s*--- SKIP: ` + q + ` \(`).MatchString(console):
		return verdictSkip
	default:
		return fmt.Sprintf("the guest did not run %s (no \"--- PASS: %s\" line in its output)", name, name)
	}
}

// testLog writes lines to the test log, each with a prefix, and keeps them for guestVerdict.
type testLog struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	all    strings.Builder
}

var _ io.Writer = (*testLog)(nil)

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.all.WriteString(line + "\n")
		fmt.Fprintf(l.t.Output(), "%s%s\n", l.prefix, line)
	}
	return len(p), nil
}

// text returns everything written so far.
func (l *testLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

// testRunPattern anchors each element of a test name for -test.run ("TestA/b c" -> "^TestA$/^b_c$"; names
// from t.Name() already have spaces replaced).
func testRunPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// testArgs are the guest test binary's flags. The guest's own -test.timeout fires shortly before the VM is
// killed, so that a hung guest test prints its goroutines.
func testArgs(pattern string, timeout time.Duration) []string {
	guestTimeout := timeout - 20*time.Second
	if guestTimeout < timeout/2 {
		guestTimeout = timeout / 2
	}
	return []string{"-test.run", pattern, "-test.v", "-test.count=1", "-test.timeout", guestTimeout.String()}
}

// Machines are the VMs StartMany booted, for a host side that coordinates with them itself (nodevm).
func (r *Running) Machines() *localvm.Machines { return r.machines }
