package lockd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// Mode says who runs the lock managers.
type Mode string

const (
	// ModeNotRunning: the Supervisor does not run (yet, or any more).
	ModeNotRunning Mode = "NotRunning"
	// ModeHost: the host's sanlock and lvmlockd answered; the agent only watches them.
	ModeHost Mode = "Host"
	// ModeAgent: the agent runs the lock managers the host does not.
	ModeAgent Mode = "Agent"
)

// The Fencing sentences of Status.
const (
	FencingOff = "no watchdog: a node that loses its leases is not reset (no fencing); " +
		"use a host with a watchdog device and wdmd for production"
	FencingOn = "watchdog in use: a node that cannot renew its leases is reset by its watchdog " +
		"before other nodes may take them over (fencing)"
)

// Status is what the Supervisor reports.
type Status struct {
	Mode   Mode
	HostID int
	// Watchdog tells whether sanlock uses the watchdog: what the running sanlock reports, or, before it runs,
	// whether the host has one.
	Watchdog bool
	// Fencing says in one sentence whether a node that loses its leases is reset (FencingOn or FencingOff).
	Fencing string
	// Wdmd is only started by the agent when the host has a watchdog device and no wdmd.
	Sanlock, Lvmlockd, Wdmd DaemonStatus
}

// DaemonStatus is one lock manager's state.
type DaemonStatus struct {
	// Running: it answers its status command.
	Running bool
	// Managed: the agent started it (otherwise it is the host's, or another agent's).
	Managed bool
	// PID of the daemon the agent started (0 when not Managed).
	PID int
	// Restarts counts the times the agent started it again after its own instance exited or failed to start.
	Restarts int
	// LastError says why it last stopped or failed to start ("" once it runs again).
	LastError string
}

// LVMConfig is the --config argument pair every lvm command on a shared volume group needs: it turns on
// lvmlockd for that command and names the host ID (vgchange --lockstart passes it to lvmlockd), without
// editing the host's lvm.conf.
func LVMConfig(hostID int) []string {
	return []string{"--config", fmt.Sprintf("global{use_lvmlockd=1} local{host_id=%d}", hostID)}
}

// Detection is what Detect found on the host.
type Detection struct {
	// Sanlock, Lvmlockd and Wdmd: the daemon answers its status command.
	Sanlock, Lvmlockd, Wdmd bool
	// WatchdogDevice: the watchdog device exists.
	WatchdogDevice bool
}

// Watchdog tells whether the host has a watchdog sanlock can use.
func (d Detection) Watchdog() bool { return d.Wdmd || d.WatchdogDevice }

// Defaults of Detect and Options.
const (
	// DefaultWatchdogDevice is the watchdog device wdmd opens.
	DefaultWatchdogDevice = "/dev/watchdog"
	// DefaultStatusTimeout bounds one status command: they answer in milliseconds, or not at all.
	DefaultStatusTimeout = 10 * time.Second
)

// Detect tells which lock managers already answer on the host (through the runner, so behind its prefix) and
// whether it has a watchdog: wdmd answers or watchdogDevice (default DefaultWatchdogDevice, as the agent
// sees it) exists. Each status command is bounded by DefaultStatusTimeout, or r.Timeout when shorter.
func Detect(ctx context.Context, r lvm.Runner, watchdogDevice string) Detection {
	if r.Timeout <= 0 || r.Timeout > DefaultStatusTimeout {
		r.Timeout = DefaultStatusTimeout
	}
	if watchdogDevice == "" {
		watchdogDevice = DefaultWatchdogDevice
	}
	_, err := os.Stat(watchdogDevice)
	return Detection{
		Sanlock:        answers(ctx, r, sanlockStatus),
		Lvmlockd:       answers(ctx, r, lvmlockdStatus),
		Wdmd:           answers(ctx, r, wdmdStatus),
		WatchdogDevice: err == nil,
	}
}

// The status commands: each exits 0 only when its daemon answers on its socket.
var (
	sanlockStatus  = []string{"sanlock", "client", "status", "-D"} // -D adds use_watchdog=
	lvmlockdStatus = []string{"lvmlockctl", "--info"}
	wdmdStatus     = []string{"wdmd", "--dump"}
)

// Info returns what `lvmlockctl --info` prints (the joined lockspaces and their locks), asking again while
// other lvmlockctl commands keep its socket busy.
func Info(ctx context.Context, r lvm.Runner) ([]byte, error) { return probe(ctx, r, lvmlockdStatus) }

// Ctl runs lvmlockctl with args, asking again while other lvmlockctl commands keep its socket busy.
func Ctl(ctx context.Context, r lvm.Runner, args ...string) ([]byte, error) {
	return probe(ctx, r, append([]string{"lvmlockctl"}, args...))
}

func answers(ctx context.Context, r lvm.Runner, argv []string) bool {
	_, err := probe(ctx, r, argv)
	return err == nil
}

// lvmlockctlBusy is lvmlockctl's exit status (-EADDRINUSE) when another lvmlockctl on the host holds the
// abstract socket that --info binds before it asks lvmlockd: it says nothing about lvmlockd.
const lvmlockctlBusy = 158

// busyRetries and busyWait bound how often a busy lvmlockctl is asked again.
const (
	busyRetries = 5
	busyWait    = 100 * time.Millisecond
)

// probe runs a status command and returns its stdout, or an error saying why the daemon does not answer.
func probe(ctx context.Context, r lvm.Runner, argv []string) ([]byte, error) {
	res, err := r.Execute(ctx, argv[0], argv[1:]...)
	for try := 1; err == nil && busy(argv, res) && try < busyRetries; try++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(busyWait):
		}
		res, err = r.Execute(ctx, argv[0], argv[1:]...)
	}
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		msg := firstLine(res.Stderr)
		if msg == "" {
			msg = firstLine(res.Stdout)
		}
		if busy(argv, res) {
			msg = "other lvmlockctl commands on the host kept its socket busy"
		}
		return nil, fmt.Errorf("%s: exit status %d: %s", strings.Join(argv, " "), res.ExitCode, msg)
	}
	return res.Stdout, nil
}

func busy(argv []string, res lvm.Result) bool {
	return argv[0] == "lvmlockctl" && res.ExitCode == lvmlockctlBusy
}

// usesWatchdog reads use_watchdog=1 from `sanlock client status -D`.
func usesWatchdog(status []byte) bool {
	for line := range bytes.Lines(status) {
		if string(bytes.TrimSpace(line)) == "use_watchdog=1" {
			return true
		}
	}
	return false
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// Lockspace states in `sanlock client status`: a joined lockspace has no flag.
const (
	LockspaceJoined   = ""
	LockspaceAdding   = "ADD"
	LockspaceRemoving = "REM"
)

// SanlockLockspaces returns sanlock's lockspaces by name with their state (LockspaceJoined, LockspaceAdding,
// LockspaceRemoving or another flag sanlock prints). It is the truth about a shared volume group's lockspace:
// lvmlockd goes on listing one whose start failed until it cleans it up.
func SanlockLockspaces(ctx context.Context, r lvm.Runner) (map[string]string, error) {
	out, err := probe(ctx, r, []string{"sanlock", "client", "status"})
	if err != nil {
		return nil, err
	}
	return parseLockspaces(out), nil
}

// parseLockspaces reads the "s NAME:HOST_ID:PATH:OFFSET[ FLAG]" lines of `sanlock client status`.
func parseLockspaces(out []byte) map[string]string {
	spaces := map[string]string{}
	for line := range bytes.Lines(out) {
		rest, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("s "))
		if !ok {
			continue
		}
		name, tail, ok := bytes.Cut(rest, []byte(":"))
		if !ok || len(name) == 0 {
			continue
		}
		flag := ""
		if i := bytes.LastIndexByte(tail, ' '); i >= 0 {
			flag = string(tail[i+1:])
		}
		spaces[string(name)] = flag
	}
	return spaces
}
