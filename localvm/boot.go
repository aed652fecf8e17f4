// This file is the host side without a test: Boot starts VMs whose guests run a given program, for a
// caller that is not a test (lvms local's nodes) as much as for StartMany, which runs the current test
// binary in them and judges the guests' tests.

package localvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// BootOptions describe the VMs Boot starts.
type BootOptions struct {
	// VMs are the machines; each needs a Name. Disks with the same Path are shared between them.
	VMs []Options
	// Binary is the host program every guest runs (it is put into the share the guests mount), in the
	// guest working directory Dir (a host path: the guest sees the host's tree at the same place).
	Binary, Dir string
	// Args are the program's arguments for one VM, given its timeout.
	Args func(vm Options, timeout time.Duration) []string
	// RunDir is a new or empty host directory for the share and the private disk files; the caller removes
	// it once the VMs are gone.
	RunDir string
	// Console returns where VM name's serial console goes, one line per Write (safe for concurrent use).
	// Nil: discarded.
	Console func(name string) io.Writer
	// Log receives the image preparation's progress (a kernel download on first use). Nil: discarded.
	Log io.Writer
}

// Machines are VMs Boot started. Their guests coordinate with the host through Signal and WaitSignal.
type Machines struct {
	run      *runDir
	configs  []MachineConfig
	machines []*Machine
	results  []Result
	wg       sync.WaitGroup
	killed   sync.Map // VM name → true for VMs Kill cut off
	cancels  []context.CancelFunc
}

// Result is how one VM ended.
type Result struct {
	Name string
	Exit Exit
	// Err is why the VM did not end with its guest's exit code (killed, timed out, qemu failed).
	Err error
	// Killed says Kill cut it off.
	Killed bool
}

// ErrQemuCannotStart wraps Boot's error when the qemu binary itself cannot be executed here.
var ErrQemuCannotStart = errors.New("qemu cannot start on this machine")

// Boot prepares the image and starts every VM; each runs until its guest program exits, its timeout
// passes or ctx ends (then qemu is killed). It fails when qemu is missing or a VM cannot start; what it
// started is then killed again.
func Boot(ctx context.Context, o BootOptions) (*Machines, error) {
	if InGuest() {
		return nil, errors.New("vm.Boot called inside a VM")
	}
	if len(o.VMs) == 0 {
		return nil, errors.New("vm.Boot: no VMs to start")
	}
	if reason := Unavailable(); reason != "" {
		return nil, fmt.Errorf("%w: %s", ErrQemuCannotStart, reason)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	cacheDir, err := CacheDir()
	if err != nil {
		return nil, err
	}
	img, err := Prepare(ctx, cacheDir, o.Log)
	if err != nil {
		return nil, fmt.Errorf("prepare the VM image: %w", err)
	}
	run, err := newRunDir(o.RunDir, o.Binary)
	if err != nil {
		return nil, err
	}
	m := &Machines{run: run}
	var timeouts []time.Duration
	seen := map[string]bool{}
	for _, v := range o.VMs {
		if v.Name == "" || seen[v.Name] {
			return nil, fmt.Errorf("vm.Boot: every VM needs a name of its own (got %q)", v.Name)
		}
		seen[v.Name] = true
		disks, err := run.disks(v, sharedPaths(o.VMs))
		if err != nil {
			return nil, fmt.Errorf("VM %s: %w", v.Name, err)
		}
		timeout := v.Timeout
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
			timeout = time.Until(d)
		}
		var args []string
		if o.Args != nil {
			args = o.Args(v, timeout)
		}
		script, err := run.writeScript(v.Name, guestScript(scriptSpec{
			role: v.Name, serials: serials(disks), env: guestEnv(v.Env), dir: o.Dir, binary: run.guestBinary, args: args,
		}))
		if err != nil {
			return nil, err
		}
		var console io.Writer
		if o.Console != nil {
			console = o.Console(v.Name)
		}
		m.configs = append(m.configs, MachineConfig{
			Name: v.Name, Image: img, MemoryMiB: v.MemoryMiB, CPUs: v.CPUs, Disks: disks,
			WorkDir: run.share, Command: script, Network: v.Network, Console: console,
		})
		timeouts = append(timeouts, timeout)
	}
	m.results = make([]Result, len(m.configs))
	for i, cfg := range m.configs {
		mctx, cancel := context.WithTimeout(ctx, timeouts[i])
		m.cancels = append(m.cancels, cancel)
		vm, err := StartMachine(mctx, cfg)
		if err != nil {
			m.Close()
			if isStartError(err) {
				return nil, fmt.Errorf("%w: %w", ErrQemuCannotStart, err)
			}
			return nil, err
		}
		m.machines = append(m.machines, vm)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			exit, err := vm.Wait()
			_, killed := m.killed.Load(cfg.Name)
			m.results[i] = Result{Name: cfg.Name, Exit: exit, Err: err, Killed: killed}
			code := exit.Code
			if err != nil {
				code = -1
			}
			if killed {
				code = 0 // cut off on purpose: the other guests go on
			}
			run.recordExit(cfg.Name, code)
		}()
	}
	return m, nil
}

// Kill powers VM name off at once, as a node that dies.
func (m *Machines) Kill(name string) error {
	for i, c := range m.configs {
		if c.Name == name {
			m.killed.Store(name, true)
			if i < len(m.machines) {
				m.machines[i].Kill()
			}
			return nil
		}
	}
	return fmt.Errorf("no VM named %q", name)
}

// Signal tells the guests name (their WaitSignal returns).
func (m *Machines) Signal(name string) error {
	if err := os.WriteFile(filepath.Join(m.SharedDir(), filepath.Base(name)), []byte(hostRole+"\n"), 0o644); err != nil {
		return fmt.Errorf("signal %q: %w", name, err)
	}
	return nil
}

// SharedDir is the host path of the guests' SharedDir.
func (m *Machines) SharedDir() string { return filepath.Join(m.run.share, "shared") }

// WaitSignal waits until a guest signals name, failing early when a VM exits with an error first.
func (m *Machines) WaitSignal(ctx context.Context, name string) error {
	return waitSignal(ctx, m.SharedDir(), name, hostRole)
}

// HostFailed tells guests waiting for the host's signals that the host has given up, so they stop now.
func (m *Machines) HostFailed() {
	_ = os.WriteFile(filepath.Join(m.SharedDir(), exitedPrefix+hostRole), []byte("1\n"), 0o644)
}

// Wait waits until every VM has powered off and returns how each ended, in BootOptions.VMs order.
func (m *Machines) Wait() []Result {
	m.wg.Wait()
	for _, c := range m.cancels {
		c()
	}
	return m.results[:len(m.machines)]
}

// Close kills every VM and waits for them.
func (m *Machines) Close() {
	for _, vm := range m.machines {
		vm.Kill()
	}
	m.Wait()
}
