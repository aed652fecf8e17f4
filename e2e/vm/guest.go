// This file is the guest side of a test: the coordination of localvm (guest.go) as test steps that fail
// the test, and the shared-VG lock daemons.

package vm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/localvm"
)

// DefaultWaitTimeout bounds WaitSignal when the test has no deadline.
const DefaultWaitTimeout = 5 * time.Minute

// Signal tells the other VMs that the named step is done (a file in SharedDir).
func Signal(t testing.TB, name string) {
	t.Helper()
	if err := localvm.SignalStep(name); err != nil {
		t.Fatal(err)
	}
	t.Logf("signalled %q", name)
}

// WaitSignal waits until some VM signals name. It fails the test when a peer VM exits with an error first
// (it will never signal), or at the test's deadline (DefaultWaitTimeout without one).
func WaitSignal(t testing.TB, name string) {
	t.Helper()
	deadline := time.Now().Add(DefaultWaitTimeout)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			deadline = dl.Add(-10 * time.Second)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := localvm.WaitStep(ctx, name); err != nil {
		t.Fatalf("wait for signal %q: %v", name, err)
	}
	t.Logf("got signal %q", name)
}

// StartLockDaemons prepares the guest for shared VGs: it sets global/use_lvmlockd = 1 in the guest's
// lvmlocal.conf, starts sanlock (no watchdog: the VM has none) and lvmlockd with hostID (1..2000, unique
// among the VMs sharing a VG), and waits until both answer. They run until the VM powers off.
func StartLockDaemons(t testing.TB, hostID int) {
	t.Helper()
	if !InGuest() {
		t.Fatal("vm.StartLockDaemons called outside a VM")
	}
	conf := "\n# Added by vm.StartLockDaemons.\nglobal {\n\tuse_lvmlockd = 1\n}\n"
	f, err := os.OpenFile("/etc/lvm/lvmlocal.conf", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString(conf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("enable lvmlockd in lvmlocal.conf: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	steps := [][]string{
		{"sanlock", "daemon", "-w", "0", "-U", "root", "-G", "root"},
		{"sanlock", "client", "status"},
		{"lvmlockd", "--host-id", fmt.Sprint(hostID)},
		{"lvmlockctl", "--info"},
	}
	for _, s := range steps {
		if err := retry(ctx, s); err != nil {
			t.Fatalf("start the lock daemons: %v", err)
		}
	}
	t.Logf("sanlock and lvmlockd running with host id %d", hostID)
}

// retry runs argv until it succeeds or ctx ends (daemons need a moment before they answer).
func retry(ctx context.Context, argv []string) error {
	for {
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// RecordingSource says where a recording made in the guest comes from: the test, the kernel and lvm2's
// version, for the Source of an lvm.Session.
func RecordingSource(test string) string {
	kernel, _ := exec.Command("uname", "-r").Output()
	version, _ := exec.Command("lvm", "version").Output()
	return fmt.Sprintf("recorded in the e2e/vm lane by %s: kernel %s, %s",
		test, strings.TrimSpace(string(kernel)), strings.TrimSpace(strings.SplitN(string(version), "\n", 2)[0]))
}
