package lvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultDevicesDir is where lvm2 keeps devices files when LVM_SYSTEM_DIR is not set.
const DefaultDevicesDir = "/etc/lvm/devices"

// Command is one host command: argv[0] is the program, looked up in PATH (after the runner's prefix).
type Command struct {
	Argv []string
	// Env is added to the process environment (KEY=value).
	Env []string
	// Timeout bounds the command's run time; 0 leaves only the caller's context.
	Timeout time.Duration
}

// String renders the command as a shell-like line for messages and logs.
func (c Command) String() string { return strings.Join(c.Argv, " ") }

// Result is what a command produced.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// Executor starts processes. The operating system executor is the default; tests use a recording, replaying
// or fault-injecting one. An Executor returns an error only when the command could not run or was stopped
// (context); a non-zero exit is reported in Result.ExitCode.
type Executor interface {
	Execute(ctx context.Context, cmd Command) (Result, error)
}

// OSExecutor runs commands with os/exec. Every command runs in its own process group (also behind
// nsenter, whose children inherit it), so that when its context ends (the command's timeout, a CSI call's
// deadline, agent shutdown) the whole group is killed with SIGKILL, not only the direct child; WaitDelay
// bounds how long a grandchild that outlived the kill may keep the output pipes open.
type OSExecutor struct{}

// waitDelay is how long Wait waits for the output pipes after the process group was killed.
const waitDelay = 5 * time.Second

// Execute implements Executor.
func (OSExecutor) Execute(ctx context.Context, cmd Command) (Result, error) {
	if len(cmd.Argv) == 0 {
		return Result{}, errors.New("empty command")
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if cmd.Timeout > 0 {
		runCtx, cancel = context.WithTimeoutCause(ctx, cmd.Timeout, errCommandTimeout)
	}
	defer cancel()
	c := exec.CommandContext(runCtx, cmd.Argv[0], cmd.Argv[1:]...)
	c.Env = append(c.Environ(), cmd.Env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return killGroup(c.Process.Pid) }
	c.WaitDelay = waitDelay
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case runCtx.Err() != nil && ctx.Err() == nil:
		return res, &TimeoutError{Command: cmd.String(), After: cmd.Timeout}
	case ctx.Err() != nil:
		return res, fmt.Errorf("run %s: %w", cmd, ctx.Err())
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	default:
		return res, fmt.Errorf("run %s: %w", cmd, err)
	}
	return res, nil
}

// killGroup kills the process group whose leader is pid (Setpgid makes the command its group's leader).
func killGroup(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pid, err)
	}
	return nil
}

// CountingExecutor counts the processes it starts, by program, and keeps their arguments, then delegates.
// It measures process spawns per reconcile.
type CountingExecutor struct {
	Next     Executor
	count    atomic.Int64
	mu       sync.Mutex
	programs map[string]int
	args     map[string][][]string
}

// Execute implements Executor.
func (c *CountingExecutor) Execute(ctx context.Context, cmd Command) (Result, error) {
	c.count.Add(1)
	c.mu.Lock()
	if c.programs == nil {
		c.programs, c.args = map[string]int{}, map[string][][]string{}
	}
	p, args := program(cmd.Argv)
	c.programs[p]++
	c.args[p] = append(c.args[p], args)
	c.mu.Unlock()
	next := c.Next
	if next == nil {
		next = OSExecutor{}
	}
	return next.Execute(ctx, cmd)
}

// Count is the number of commands started so far.
func (c *CountingExecutor) Count() int64 { return c.count.Load() }

// Programs is the number of commands started so far by program ("lvm fullreport", "lsblk").
func (c *CountingExecutor) Programs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.programs)
}

// Args are the arguments of every command of a program started so far (after the program's name and,
// for lvm2, its subcommand), oldest first.
func (c *CountingExecutor) Args(program string) [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.args[program])
}

// Reset forgets what was counted and kept.
func (c *CountingExecutor) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count.Store(0)
	c.programs, c.args = nil, nil
}

// program names what a command runs, the binary after any nsenter prefix with lvm2's subcommand, and
// returns the arguments that follow.
func program(argv []string) (string, []string) {
	if i := slices.Index(argv, "--"); i >= 0 && len(argv) > 0 && filepath.Base(argv[0]) == "nsenter" {
		argv = argv[i+1:]
	}
	if len(argv) == 0 {
		return "", nil
	}
	name := filepath.Base(argv[0])
	if name == "lvm" && len(argv) > 1 {
		return name + " " + argv[1], argv[2:]
	}
	return name, argv[1:]
}

// Runner runs host commands the way the node agent must: behind an optional prefix (nsenter into the host's
// namespaces when the agent runs in a container), with LC_ALL=C so output is parseable, and, for lvm2, with
// the agent's own devices file so that the agent sees only the devices it owns.
type Runner struct {
	// Prefix is put before every command, for example
	// ["nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--"].
	Prefix []string
	// Env is added to every command's environment, for example LVM_SYSTEM_DIR=/etc/lvm-node-a.
	Env []string
	// LVM is the lvm2 binary (default "lvm").
	LVM string
	// DevicesFile is the name of the agent's LVM devices file (a file name in the devices directory, see
	// DevicesDir). Empty means the host's lvm.conf decides (system.devices or no devices file).
	DevicesFile string
	// Exec starts the processes (default OSExecutor).
	Exec Executor
	// Timeout bounds every command (default DefaultTimeout). A command still running then is killed with
	// its process group and fails with a *TimeoutError.
	Timeout time.Duration
	// LockDir holds LVMS's volume group locks (default DefaultLockDir; see LockVG).
	LockDir string
}

// LockVG takes LVMS's lock of a volume group in the runner's lock directory.
func (r Runner) LockVG(ctx context.Context, vg string) (unlock func(), err error) {
	return LockVG(ctx, r.LockDir, vg)
}

// DefaultTimeout bounds a host command when the Runner sets no Timeout. It is far above what a healthy
// lvm2, lsblk, wipefs, mkfs or mount needs, and short enough that a hung device shows as an error.
const DefaultTimeout = 5 * time.Minute

// NSEnterPrefix is the prefix that runs a command in the namespaces of the host's PID 1 (the agent's pod
// needs hostPID and privileges).
func NSEnterPrefix() []string {
	return []string{"nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--"}
}

// DevicesDir is the directory of lvm2 devices files as this runner's commands see it.
func (r Runner) DevicesDir() string {
	for _, e := range r.Env {
		if v, ok := strings.CutPrefix(e, "LVM_SYSTEM_DIR="); ok && v != "" {
			return filepath.Join(v, "devices")
		}
	}
	return DefaultDevicesDir
}

// DevicesFilePath is the full path of the runner's devices file, or "" when it has none.
func (r Runner) DevicesFilePath() string {
	if r.DevicesFile == "" {
		return ""
	}
	return filepath.Join(r.DevicesDir(), r.DevicesFile)
}

func (r Runner) executor() Executor {
	if r.Exec == nil {
		return OSExecutor{}
	}
	return r.Exec
}

// command builds the full command line for name and args.
func (r Runner) command(name string, args []string) Command {
	argv := make([]string, 0, len(r.Prefix)+1+len(args))
	argv = append(argv, r.Prefix...)
	argv = append(argv, name)
	argv = append(argv, args...)
	env := append([]string{"LC_ALL=C", "LVM_SUPPRESS_FD_WARNINGS=1"}, r.Env...)
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return Command{Argv: argv, Env: env, Timeout: timeout}
}

// Execute runs a host command (behind the prefix, with the environment and timeout) and returns what it
// produced; a non-zero exit is in Result.ExitCode, not an error.
func (r Runner) Execute(ctx context.Context, name string, args ...string) (Result, error) {
	res, err := r.executor().Execute(ctx, r.command(name, args))
	if te, ok := AsTimeout(err); ok {
		te.Command = strings.Join(append([]string{name}, args...), " ") // the prefix says nothing
	}
	return res, err
}

// Run runs a host command and returns its stdout. A non-zero exit is a *CommandError carrying the exit code
// and stderr.
func (r Runner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	res, err := r.Execute(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return res.Stdout, &CommandError{Command: strings.Join(append([]string{name}, args...), " "),
			Code: res.ExitCode, Stderr: strings.TrimSpace(string(res.Stderr))}
	}
	return res.Stdout, nil
}

// LVMArgs returns the lvm2 argument list for a subcommand, with the devices file inserted.
func (r Runner) LVMArgs(sub string, args ...string) []string {
	out := []string{sub}
	if r.DevicesFile != "" {
		out = append(out, "--devicesfile", r.DevicesFile)
	}
	return append(out, args...)
}

// LVMCmd runs `lvm <sub> [--devicesfile f] args...`.
func (r Runner) LVMCmd(ctx context.Context, sub string, args ...string) ([]byte, error) {
	lvm := r.LVM
	if lvm == "" {
		lvm = "lvm"
	}
	return r.Run(ctx, lvm, r.LVMArgs(sub, args...)...)
}

// EnsureDevicesFile creates the runner's devices file when it does not exist yet. lvm2 treats a devices
// file that does not exist as "no devices file" and then sees every device on the host, which would break
// the scoping; an empty file means "no devices yet".
func (r Runner) EnsureDevicesFile(ctx context.Context) error {
	path := r.DevicesFilePath()
	if path == "" {
		return nil
	}
	if _, err := r.Run(ctx, "mkdir", "-p", "-m", "0700", filepath.Dir(path)); err != nil {
		return fmt.Errorf("create the LVM devices directory %s: %w", filepath.Dir(path), err)
	}
	// touch creates the file and never truncates one that exists.
	if _, err := r.Run(ctx, "touch", path); err != nil {
		return fmt.Errorf("create the LVM devices file %s: %w", path, err)
	}
	return nil
}
