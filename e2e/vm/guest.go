// This file is the guest side: what a test running inside the VM uses to learn its role and disks, to
// coordinate with the other VMs of a RunMany, and to start the shared-VG lock daemons.

package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exitedPrefix names the files the host writes into the shared directory when a VM exits.
const exitedPrefix = ".exited-"

// DefaultWaitTimeout bounds WaitSignal when the test has no deadline.
const DefaultWaitTimeout = 5 * time.Minute

// InGuest reports whether the code runs inside a VM started by this package.
func InGuest() bool { return os.Getenv(EnvInVM) == "1" }

// Role is the VM's Options.Name ("vm" for Run; "a", "b", ... by default for RunMany), or "" on the host.
func Role() string { return os.Getenv(EnvRole) }

// SharedDir is the directory all VMs of one Run or RunMany share read-write, or "" on the host.
func SharedDir() string { return os.Getenv(EnvShared) }

// Disks returns the device paths (/dev/vdX) of the VM's disks in Options.Disks order, matched by serial
// through /sys/block. (There is no udev in the guest; init also links /dev/disk/by-id/virtio-<serial>.)
func Disks() ([]string, error) {
	if !InGuest() {
		return nil, errors.New("vm.Disks called outside a VM")
	}
	want := strings.Fields(os.Getenv(EnvDisks))
	bySerial, err := diskSerials("/sys/block")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range want {
		dev, ok := bySerial[s]
		if !ok {
			return nil, fmt.Errorf("no virtio disk with serial %q in /sys/block (found %v)", s, bySerial)
		}
		out = append(out, "/dev/"+dev)
	}
	return out, nil
}

// diskSerials maps the serials of the vd* block devices under sysBlock to their names.
func diskSerials(sysBlock string) (map[string]string, error) {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	m := map[string]string{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "vd") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(sysBlock, e.Name(), "serial"))
		if err != nil {
			continue
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			m[s] = e.Name()
		}
	}
	return m, nil
}

// Signal tells the other VMs that the named step is done (a file in SharedDir).
func Signal(t testing.TB, name string) {
	t.Helper()
	// Written whole under a hidden name, then renamed: a waiter that sees the name reads the whole content.
	path := signalPath(name)
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+Role())
	if err := os.WriteFile(tmp, []byte(Role()+"\n"), 0o644); err != nil {
		t.Fatalf("signal %q: %v", name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("signal %q: %v", name, err)
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
	if err := waitSignal(ctx, SharedDir(), name, Role()); err != nil {
		t.Fatalf("wait for signal %q: %v", name, err)
	}
	t.Logf("got signal %q", name)
}

// waitSignal polls dir for the signal file name, failing early when a VM other than self exits non-zero.
func waitSignal(ctx context.Context, dir, name, self string) error {
	if dir == "" {
		return errors.New("no shared directory: not running under vm.Run or vm.RunMany")
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return nil
		}
		exited, _ := filepath.Glob(filepath.Join(dir, exitedPrefix+"*"))
		for _, e := range exited {
			peer := strings.TrimPrefix(filepath.Base(e), exitedPrefix)
			code, _ := os.ReadFile(e)
			if peer != self && strings.TrimSpace(string(code)) != "0" {
				return fmt.Errorf("VM %s failed (exit %s) before signalling", peer, strings.TrimSpace(string(code)))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no VM signalled: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// signalPath is the file of a signal; names are plain file names.
func signalPath(name string) string {
	return filepath.Join(SharedDir(), filepath.Base(name))
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

// Signalled reports whether some VM (or the host) has signalled name, without waiting.
func Signalled(name string) bool {
	_, err := os.Stat(signalPath(name))
	return err == nil
}
