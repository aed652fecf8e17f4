// This file runs one qemu VM: software emulation (TCG, never KVM), no network unless asked (network.go), the host's / read-only and a
// work directory read-write over virtio-9p, raw disk files on virtio-blk (shareable between VMs), the
// serial console streamed line by line, and the guest command's exit code read from init's marker lines.

package localvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lvms-dev/lvms/reaper"
)

// QemuBinary is the emulator the lane runs (Debian package qemu-system-x86).
const QemuBinary = "qemu-system-x86_64"

// GuestWorkDir is where the guest sees MachineConfig.WorkDir.
const GuestWorkDir = "/lvms-vm"

// Console marker lines printed by init.sh.
const (
	markerStart = "LVMS-VM-START"
	markerExit  = "LVMS-VM-EXIT "
	markerError = "LVMS-VM-ERROR "
)

// MachineDisk is a raw disk image file attached as a virtio-blk device.
type MachineDisk struct {
	// Path is the raw image file on the host.
	Path string
	// Serial is the device serial the guest reads from /sys/block/vdX/serial (at most 20 characters of
	// [A-Za-z0-9_.-]).
	Serial string
	// Shared attaches the file so that several VMs may use it at once (a shared LUN): no image locking,
	// share-rw on the device.
	Shared bool
}

// MachineConfig describes one VM.
type MachineConfig struct {
	// Name labels the VM in logs and is its host name.
	Name string
	// Image is the kernel and initramfs to boot.
	Image *Image
	// MemoryMiB and CPUs size the VM.
	MemoryMiB int
	CPUs      int
	// Disks are attached in this order (the first is usually vda).
	Disks []MachineDisk
	// WorkDir is a host directory the guest mounts read-write at GuestWorkDir.
	WorkDir string
	// Command is the guest path of a shell script the guest runs as root (through /bin/sh).
	Command string
	// Network, when set, gives the VM a NIC on a restricted user-mode network (see Network); without it
	// the guest has only the loopback interface.
	Network *Network
	// Console receives the serial console and qemu's own messages, one line per Write, without line
	// endings; it must be safe for concurrent use. It may be nil.
	Console io.Writer
}

// Machine is a running VM.
type Machine struct {
	name        string
	ctx         context.Context
	cmd         *exec.Cmd
	started     time.Time
	console     *consoleParser // the serial console (qemu's stdout)
	stderrLines *consoleParser // qemu's stderr, forwarded like the console
	stderr      bytes.Buffer
	done        chan struct{}
	waitErr     error
	once        sync.Once
}

// Exit describes how a VM ended.
type Exit struct {
	// Code is the guest command's exit code.
	Code int
	// Boot is the time from starting qemu to the guest command's start.
	Boot time.Duration
	// Total is the time from starting qemu to its exit.
	Total time.Duration
	// CPU is the host CPU time qemu used (user and system): under emulation a VM's cost is this, not its
	// wall time, and what the VM lane's tests add up to on a machine with few cores.
	CPU time.Duration
}

// kernelCmdline is the kernel command line: serial console, power off on panic (-no-reboot), no timer
// IRQ check (it misfires under emulation on a busy host), and the guest script for init.sh (a path: the
// kernel refuses long command lines, so scripts themselves never go here).
func kernelCmdline(name, command string, extra ...string) string {
	return strings.Join(append([]string{
		"console=ttyS0", "quiet", "panic=-1", "no_timer_check", "mitigations=off", "random.trust_cpu=on",
		"lvms.name=" + name, "lvms.cmd=" + command,
	}, extra...), " ")
}

// validToken reports whether s is safe in a qemu option value and on the kernel command line.
var validToken = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`).MatchString

// qemuArgs builds the qemu command line for cfg.
func qemuArgs(cfg MachineConfig) ([]string, error) {
	if cfg.Image == nil {
		return nil, errors.New("no image to boot")
	}
	if !validToken(cfg.Name) {
		return nil, fmt.Errorf("VM name %q: use letters, digits, '.', '_' and '-'", cfg.Name)
	}
	if cfg.Command == "" || strings.ContainsAny(cfg.Command, " \t\n,") {
		return nil, fmt.Errorf("guest command %q: want a path without spaces or commas", cfg.Command)
	}
	if cfg.WorkDir == "" {
		return nil, errors.New("no work directory")
	}
	mem, cpus := cfg.MemoryMiB, cfg.CPUs
	if mem <= 0 {
		mem = 2048
	}
	if cpus <= 0 {
		cpus = 1
	}
	nic, cmdline := []string{"-nic", "none"}, []string(nil)
	if cfg.Network != nil {
		var err error
		if nic, err = cfg.Network.qemuArgs(); err != nil {
			return nil, err
		}
		cmdline = cfg.Network.kernelArgs()
	}
	args := []string{
		"-nodefaults", "-no-user-config",
		"-machine", "q35,accel=tcg", "-cpu", "max",
		"-m", strconv.Itoa(mem), "-smp", strconv.Itoa(cpus),
		"-display", "none", "-monitor", "none", "-serial", "stdio",
		"-no-reboot",
		"-kernel", cfg.Image.Kernel, "-initrd", cfg.Image.Initramfs,
		"-append", kernelCmdline(cfg.Name, cfg.Command, cmdline...),
		"-device", "virtio-rng-pci",
		"-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
		"-fsdev", "local,id=lvmsvm,path=" + optionValue(cfg.WorkDir) + ",security_model=none,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=lvmsvm,mount_tag=lvmsvm",
	}
	args = append(args, nic...)
	for i, d := range cfg.Disks {
		if d.Path == "" {
			return nil, fmt.Errorf("disk %d: no path", i)
		}
		if d.Serial != "" && (!validToken(d.Serial) || len(d.Serial) > 20) {
			return nil, fmt.Errorf("disk %d: serial %q: want at most 20 letters, digits, '.', '_' or '-'", i, d.Serial)
		}
		drive := fmt.Sprintf("file=%s,if=none,id=d%d,format=raw,cache=unsafe", optionValue(d.Path), i)
		dev := fmt.Sprintf("virtio-blk-pci,drive=d%d", i)
		if d.Serial != "" {
			dev += ",serial=" + d.Serial
		}
		if d.Shared {
			drive += ",file.locking=off"
			dev += ",share-rw=on"
		}
		args = append(args, "-drive", drive, "-device", dev)
	}
	return args, nil
}

// optionValue escapes a value for a qemu option list (a comma is written twice).
func optionValue(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// StartMachine boots a VM. Cancelling ctx (or its deadline) kills qemu; so does the exit of the calling
// process. Call Wait to collect the result.
func StartMachine(ctx context.Context, cfg MachineConfig) (*Machine, error) {
	args, err := qemuArgs(cfg)
	if err != nil {
		return nil, fmt.Errorf("VM %s: %w", cfg.Name, err)
	}
	// qemu and what it runs (the guestfwd relays) carry the test binary's mark: should the binary die, its
	// watchdog (reaper) kills them all and says so; Pdeathsig reaches qemu alone.
	if err := reaper.Start(); err != nil {
		return nil, fmt.Errorf("VM %s: %w", cfg.Name, err)
	}
	m := &Machine{name: cfg.Name, ctx: ctx, done: make(chan struct{})}
	m.console = &consoleParser{out: cfg.Console, exitCode: -1}
	// qemu's own messages: a separate line splitter, so they never break a console line apart.
	m.stderrLines = &consoleParser{out: cfg.Console, exitCode: -1}
	cmd := exec.CommandContext(ctx, QemuBinary, args...)
	cmd.Stdout = m.console
	cmd.Stderr = io.MultiWriter(&m.stderr, m.stderrLines)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	cmd.WaitDelay = 10 * time.Second
	m.cmd = cmd
	m.started = time.Now()
	m.console.started = m.started
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s for VM %s: %w", QemuBinary, cfg.Name, err)
	}
	go func() {
		m.waitErr = cmd.Wait()
		m.console.flush()
		m.stderrLines.flush()
		close(m.done)
	}()
	return m, nil
}

// Kill stops the VM at once. It is safe to call at any time, also after the VM exited.
func (m *Machine) Kill() {
	select {
	case <-m.done:
	default:
		m.cmd.Process.Kill()
	}
}

// Wait waits for the VM to power off and returns the guest command's exit code. It fails when qemu failed
// or was killed (the error then wraps the context's error, e.g. context.DeadlineExceeded on a timeout), or
// when the guest never reported an exit code (the error names the last console lines).
func (m *Machine) Wait() (Exit, error) {
	<-m.done
	exit := Exit{Total: time.Since(m.started)}
	if ps := m.cmd.ProcessState; ps != nil {
		exit.CPU = ps.UserTime() + ps.SystemTime()
	}
	c := m.console
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bootTime > 0 {
		exit.Boot = c.bootTime
	}
	if ctxErr := m.ctx.Err(); ctxErr != nil {
		return exit, fmt.Errorf("VM %s killed after %s: %w%s", m.name, exit.Total.Round(time.Second), ctxErr, c.tailNote())
	}
	if c.setupErr != "" {
		return exit, fmt.Errorf("VM %s could not run its command: %s%s", m.name, c.setupErr, c.tailNote())
	}
	if m.waitErr != nil {
		return exit, fmt.Errorf("VM %s: %s failed: %w: %s%s", m.name, QemuBinary, m.waitErr, strings.TrimSpace(m.stderr.String()), c.tailNote())
	}
	if c.exitCode < 0 {
		return exit, fmt.Errorf("VM %s powered off without reporting an exit code (kernel panic or init failure?)%s", m.name, c.tailNote())
	}
	exit.Code = c.exitCode
	return exit, nil
}

// consoleParser splits the console into lines, forwards them and watches for init's markers.
type consoleParser struct {
	out     io.Writer
	started time.Time

	mu       sync.Mutex
	partial  []byte
	tail     []string // last lines, for error messages
	exitCode int      // -1 until the exit marker was seen
	setupErr string
	bootTime time.Duration
}

// tailLines is how many console lines an error message quotes.
const tailLines = 15

func (c *consoleParser) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		c.line(string(c.partial[:i]))
		c.partial = c.partial[i+1:]
	}
	return len(p), nil
}

// flush handles a last line without a newline.
func (c *consoleParser) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.partial) > 0 {
		c.line(string(c.partial))
		c.partial = nil
	}
}

// line handles one console line; the caller holds mu.
func (c *consoleParser) line(l string) {
	l = strings.TrimRight(l, "\r")
	l = strings.TrimLeft(l, "\r")
	switch {
	case l == markerStart:
		c.bootTime = time.Since(c.started)
	case strings.HasPrefix(l, markerExit):
		if code, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l, markerExit))); err == nil {
			c.exitCode = code
		}
	case strings.HasPrefix(l, markerError):
		c.setupErr = strings.TrimPrefix(l, markerError)
	}
	c.tail = append(c.tail, l)
	if len(c.tail) > tailLines {
		c.tail = c.tail[len(c.tail)-tailLines:]
	}
	if c.out != nil {
		c.out.Write([]byte(l))
	}
}

// tailNote quotes the last console lines; the caller holds mu.
func (c *consoleParser) tailNote() string {
	if len(c.tail) == 0 {
		return " (no console output)"
	}
	return "; last console lines:\n\t" + strings.Join(c.tail, "\n\t")
}

// isStartError tells whether err means the qemu binary itself could not be executed (as opposed to a VM
// that started and failed).
func isStartError(err error) bool {
	var execErr *exec.Error
	var pathErr *os.PathError
	return errors.As(err, &execErr) || errors.As(err, &pathErr)
}
