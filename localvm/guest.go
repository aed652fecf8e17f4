// This file is the guest side: what a program running inside the VM uses to learn its role and disks and to
// coordinate with the other VMs (and the host) of one Boot.

package localvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// exitedPrefix names the files the host writes into the shared directory when a VM exits.
const exitedPrefix = ".exited-"

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

// waitSignal polls dir for the signal file name, failing early when a VM other than self exits non-zero.
func waitSignal(ctx context.Context, dir, name, self string) error {
	if dir == "" {
		return errors.New("no shared directory: not running in a VM that localvm.Boot started")
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

// Signalled reports whether some VM (or the host) has signalled name, without waiting.
func Signalled(name string) bool {
	_, err := os.Stat(signalPath(name))
	return err == nil
}

// SignalStep tells the other VMs and the host that the named step is done (a file in SharedDir, written
// whole under a hidden name and then renamed, so a waiter that sees the name reads the whole content).
func SignalStep(name string) error {
	path := signalPath(name)
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+Role())
	if err := os.WriteFile(tmp, []byte(Role()+"\n"), 0o644); err != nil {
		return fmt.Errorf("signal %q: %w", name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("signal %q: %w", name, err)
	}
	return nil
}

// WaitStep waits until some VM or the host signals name, failing early when a peer VM exits with an error
// first (it will never signal) or when ctx ends.
func WaitStep(ctx context.Context, name string) error {
	return waitSignal(ctx, SharedDir(), name, Role())
}
