package lockd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/shared/hostid"
)

// Defaults of Options.
const (
	// DefaultLockFile is held while the agent runs the lock managers; the agent's pod must mount /run/lvms
	// from the host so every agent on the host sees the same file.
	DefaultLockFile      = "/run/lvms/lockd.lock"
	DefaultWatchInterval = 10 * time.Second
	DefaultStartTimeout  = 30 * time.Second
	DefaultStopGrace     = 10 * time.Second
	DefaultStableAfter   = time.Minute
)

// DefaultBackoff paces restarts: 1 s, 2 s, 4 s ... up to a minute.
var DefaultBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: time.Minute}

// answerPoll is how often a started daemon is asked whether it answers yet.
const answerPoll = 100 * time.Millisecond

// Options configure a Supervisor.
type Options struct {
	// Runner runs the status commands and lends the daemons its Prefix and Env (its Exec and Timeout are not
	// used for the daemons, which run until stopped).
	Runner lvm.Runner
	// HostID is the node's sanlock host ID (hostid.Min..hostid.Max), given to lvmlockd.
	HostID int
	// Clock paces waits and backoff (default the real clock).
	Clock clock.Clock
	// Backoff paces the restarts of a daemon that keeps exiting (default DefaultBackoff); a daemon that ran
	// StableAfter (default DefaultStableAfter) starts the backoff over.
	Backoff     wait.Backoff
	StableAfter time.Duration
	// WatchInterval is how often daemons the agent did not start are checked, and a held lock file retried
	// (default DefaultWatchInterval).
	WatchInterval time.Duration
	// StartTimeout is how long a started daemon has to answer (default DefaultStartTimeout).
	StartTimeout time.Duration
	// StopGrace is how long a daemon has to exit after SIGTERM before its process group is killed (default
	// DefaultStopGrace).
	StopGrace time.Duration
	// StatusTimeout bounds each status command (default DefaultStatusTimeout).
	StatusTimeout time.Duration
	// LockFile is flocked while the agent runs lock managers (default DefaultLockFile).
	LockFile string
	// WatchdogDevice is the watchdog device as the agent sees it (default DefaultWatchdogDevice).
	WatchdogDevice string
	// Log receives starts, exits and restarts (default: discarded).
	Log logr.Logger
	// SanlockIOTimeout is sanlock's I/O timeout in seconds for the lock managers the agent runs and the
	// lockspaces their lvmlockd joins (0: sanlock's default, 10 s). A host is dead for sanlock, and its locks
	// free for other hosts, 8 times this plus 60 s after its last renewal (140 s by default); shorter only
	// for tests, longer for slow SAN paths.
	SanlockIOTimeout int
}

// Supervisor uses or runs a node's lock managers. Its methods are safe for concurrent use.
type Supervisor struct {
	opts Options

	mu      sync.Mutex
	st      Status
	running bool
}

// New checks opts and fills in the defaults.
func New(opts Options) (*Supervisor, error) {
	if err := checkHostID(opts.HostID); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Backoff.Duration <= 0 {
		opts.Backoff = DefaultBackoff
	}
	defaults := []struct {
		d *time.Duration
		v time.Duration
	}{
		{&opts.StableAfter, DefaultStableAfter}, {&opts.WatchInterval, DefaultWatchInterval},
		{&opts.StartTimeout, DefaultStartTimeout}, {&opts.StopGrace, DefaultStopGrace},
		{&opts.StatusTimeout, DefaultStatusTimeout},
	}
	for _, d := range defaults {
		if *d.d <= 0 {
			*d.d = d.v
		}
	}
	if opts.LockFile == "" {
		opts.LockFile = DefaultLockFile
	}
	if opts.WatchdogDevice == "" {
		opts.WatchdogDevice = DefaultWatchdogDevice
	}
	opts.Runner.Timeout = opts.StatusTimeout
	s := &Supervisor{opts: opts}
	s.st = Status{Mode: ModeNotRunning, HostID: opts.HostID, Fencing: FencingOff}
	return s, nil
}

func checkHostID(id int) error {
	if id < hostid.Min || id > hostid.Max {
		return fmt.Errorf("lockd: host ID %d is out of range: sanlock takes %d..%d (claim one with package hostid)",
			id, hostid.Min, hostid.Max)
	}
	return nil
}

// Status is a snapshot of the lock managers' state.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// SetHostID changes the host ID for the next Run. While Run runs it refuses a different ID: lvmlockd keeps
// its host ID until it restarts, which needs its lockspaces stopped.
func (s *Supervisor) SetHostID(id int) error {
	if err := checkHostID(id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == s.st.HostID {
		return nil
	}
	if s.running {
		return fmt.Errorf("lockd: host ID change from %d to %d refused while the lock managers run: stop the "+
			"shared volume groups' lockspaces (vgchange --lockstop), then restart the agent", s.st.HostID, id)
	}
	s.st.HostID = id
	return nil
}

// Run uses the host's lock managers or runs them until ctx ends, then stops those it started and returns
// nil. It returns an error only when it cannot start supervising (Run already running, lock file unusable).
func (s *Supervisor) Run(ctx context.Context) error {
	hostID, err := s.begin()
	if err != nil {
		return err
	}
	defer s.end()
	det := Detect(ctx, s.opts.Runner, s.opts.WatchdogDevice)
	s.update(func(st *Status) { st.Watchdog = det.Watchdog() })
	if det.Sanlock && det.Lvmlockd {
		return s.watchHost(ctx)
	}
	unlock, useHost, err := s.lock(ctx)
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return nil
	case useHost:
		return s.watchHost(ctx)
	}
	defer unlock()
	// Look again: the host may have changed while another agent held the lock.
	s.runAgent(ctx, hostID, Detect(ctx, s.opts.Runner, s.opts.WatchdogDevice))
	return nil
}

func (s *Supervisor) begin() (hostID int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return 0, errors.New("lockd: Run is already running on this Supervisor")
	}
	s.running = true
	return s.st.HostID, nil
}

func (s *Supervisor) end() {
	s.update(func(st *Status) {
		st.Mode = ModeNotRunning
		for _, d := range []*DaemonStatus{&st.Sanlock, &st.Lvmlockd, &st.Wdmd} {
			d.Running, d.PID = false, 0
		}
	})
	s.mu.Lock()
	s.running = false
	s.mu.Unlock()
}

// update changes the status under the lock and keeps Fencing in line with Watchdog.
func (s *Supervisor) update(f func(*Status)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
	s.st.Fencing = FencingOff
	if s.st.Watchdog {
		s.st.Fencing = FencingOn
	}
}

// sleep waits d or until ctx ends; false when ctx ended.
func (s *Supervisor) sleep(ctx context.Context, d time.Duration) bool {
	t := s.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// lock takes the lock file. While another agent on this host holds it (it is starting the daemons), it
// waits, and returns useHost once both daemons answer.
func (s *Supervisor) lock(ctx context.Context) (unlock func(), useHost bool, err error) {
	path := s.opts.LockFile
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("lockd: %w (the agent's pod must mount the host's %s there, so that every "+
			"agent on the host shares the lock file)", err, filepath.Dir(path))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("lockd: open the lock managers' lock file: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, false, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, false, fmt.Errorf("lockd: lock %s: %w", path, err)
		}
		if det := Detect(ctx, s.opts.Runner, s.opts.WatchdogDevice); det.Sanlock && det.Lvmlockd {
			_ = f.Close()
			return nil, true, nil
		}
		s.opts.Log.Info("another agent on this host holds the lock managers' lock file; waiting", "lockFile", path)
		if !s.sleep(ctx, s.opts.WatchInterval) {
			_ = f.Close()
			return nil, false, nil
		}
	}
}

// watchHost reports the host's daemons until ctx ends. It never starts or stops one.
func (s *Supervisor) watchHost(ctx context.Context) error {
	s.update(func(st *Status) { st.Mode = ModeHost })
	daemons := []*daemon{newSanlock(false, 0), newLvmlockd(0, 0)}
	for {
		for _, d := range daemons {
			s.check(ctx, d)
		}
		if !s.sleep(ctx, s.opts.WatchInterval) {
			return nil
		}
	}
}

// check asks a daemon the agent did not start whether it answers, and reports it.
func (s *Supervisor) check(ctx context.Context, d *daemon) bool {
	out, err := probe(ctx, s.opts.Runner, d.status)
	if ctx.Err() != nil {
		return false
	}
	s.reportOther(d, out, err)
	if err != nil {
		s.opts.Log.Info("lock manager stopped answering", "daemon", d.name, "error", err.Error())
	}
	return err == nil
}

// reportOther reports a daemon the agent did not start from its status command's output or error.
func (s *Supervisor) reportOther(d *daemon, out []byte, err error) {
	s.update(func(st *Status) {
		ds := d.of(st)
		ds.Running, ds.Managed, ds.PID, ds.LastError = err == nil, false, 0, ""
		if err != nil {
			ds.LastError = d.name + " stopped answering: " + err.Error()
		}
		if err == nil && d.name == "sanlock" {
			st.Watchdog = usesWatchdog(out)
		}
	})
}

// runAgent keeps the daemons the host does not run running until ctx ends, then stops those it started,
// lvmlockd first.
func (s *Supervisor) runAgent(ctx context.Context, hostID int, det Detection) {
	s.update(func(st *Status) { st.Mode = ModeAgent })
	var daemons []*daemon
	if det.WatchdogDevice && !det.Wdmd {
		daemons = append(daemons, newWdmd())
	}
	daemons = append(daemons, newSanlock(det.Watchdog(), s.opts.SanlockIOTimeout), newLvmlockd(hostID, s.opts.SanlockIOTimeout))
	var wg sync.WaitGroup
	for i, d := range daemons {
		if i > 0 {
			d.after = daemons[i-1].ready
		}
		wg.Go(func() { s.keep(ctx, d) })
	}
	wg.Wait()
	for i := len(daemons) - 1; i >= 0; i-- {
		if p := daemons[i].proc; p != nil {
			s.stop(daemons[i], p)
		}
	}
}

// keep makes sure one instance of d answers: the host's when it has one, else the agent's, started again
// with a backoff when it exits. When ctx ends it returns and leaves the agent's instance in d.proc.
func (s *Supervisor) keep(ctx context.Context, d *daemon) {
	if d.after != nil {
		select {
		case <-ctx.Done():
			return
		case <-d.after:
		}
	}
	bo := newRestartBackoff(s.opts.Backoff, s.opts.StableAfter)
	for ctx.Err() == nil {
		if out, err := probe(ctx, s.opts.Runner, d.status); err == nil {
			s.reportOther(d, out, nil)
			d.markReady() // not ours: use it, and look again later
			if !s.sleep(ctx, s.opts.WatchInterval) {
				return
			}
			continue
		}
		started := s.opts.Clock.Now()
		err := s.runOnce(ctx, d)
		if ctx.Err() != nil {
			return
		}
		delay := bo.next(s.opts.Clock.Since(started))
		s.update(func(st *Status) {
			ds := d.of(st)
			ds.Running, ds.PID, ds.LastError = false, 0, err.Error()
		})
		s.opts.Log.Info("lock manager stopped; restarting it", "daemon", d.name, "error", err.Error(), "after", delay)
		if !s.sleep(ctx, delay) {
			return
		}
	}
}

// runOnce starts the agent's instance of d and waits until it exits (its error) or ctx ends (nil; d.proc
// stays for runAgent to stop).
func (s *Supervisor) runOnce(ctx context.Context, d *daemon) error {
	if d.startedBefore {
		s.update(func(st *Status) { d.of(st).Restarts++ })
	}
	d.startedBefore = true
	p, err := startProcess(s.opts.Runner, d.name, d.args)
	if err != nil {
		return err
	}
	d.proc = p
	out, err := s.awaitAnswer(ctx, d, p)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		s.stop(d, p)
		d.proc = nil
		return err
	}
	pid := p.daemonPID(d.name)
	s.update(func(st *Status) {
		ds := d.of(st)
		ds.Running, ds.Managed, ds.PID, ds.LastError = true, true, pid, ""
		if d.name == "sanlock" {
			st.Watchdog = usesWatchdog(out)
		}
	})
	s.opts.Log.Info("started lock manager", "daemon", d.name, "pid", pid)
	d.markReady()
	select {
	case <-ctx.Done():
		return nil
	case <-p.done:
		d.proc = nil
		p.killStragglers()
		return p.exitError(d.name)
	}
}

// awaitAnswer waits until the started daemon answers its status command, and returns that command's output.
func (s *Supervisor) awaitAnswer(ctx context.Context, d *daemon, p *process) ([]byte, error) {
	deadline := s.opts.Clock.Now().Add(s.opts.StartTimeout)
	for {
		out, err := probe(ctx, s.opts.Runner, d.status)
		switch {
		case err == nil:
			return out, nil
		case p.exited():
			return nil, p.exitError(d.name)
		case !s.opts.Clock.Now().Before(deadline):
			return nil, fmt.Errorf("%s (pid %d) did not answer within %s: %w", d.name, p.cmd.Process.Pid,
				s.opts.StartTimeout, err)
		}
		if !s.sleep(ctx, answerPoll) {
			return nil, ctx.Err()
		}
	}
}

// stop ends a daemon the agent started: SIGTERM to its process group, SIGKILL after the grace period. A
// daemon holding lockspaces may refuse SIGTERM; the kill then drops its locks (see the package doc).
func (s *Supervisor) stop(d *daemon, p *process) {
	if p.exited() && !p.groupAlive() {
		return
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		s.opts.Log.Error(err, "stop lock manager", "daemon", d.name)
	}
	if s.waitGone(p, s.opts.StopGrace) {
		return
	}
	s.opts.Log.Info("lock manager did not exit after SIGTERM; killing its process group", "daemon", d.name,
		"grace", s.opts.StopGrace)
	if err := p.signal(syscall.SIGKILL); err != nil {
		s.opts.Log.Error(err, "kill lock manager", "daemon", d.name)
	}
	if !s.waitGone(p, pipeWait+time.Second) {
		s.opts.Log.Info("lock manager still runs after SIGKILL (stuck in the kernel?)", "daemon", d.name)
	}
}

// waitGone waits up to d until the process and every other member of its group exited.
func (s *Supervisor) waitGone(p *process, d time.Duration) bool {
	timeout := s.opts.Clock.After(d)
	select {
	case <-p.done:
	case <-timeout:
		return false
	}
	for p.groupAlive() {
		select {
		case <-timeout:
			return false
		case <-s.opts.Clock.After(answerPoll):
		}
	}
	return true
}

// daemon is one lock manager the agent may run.
type daemon struct {
	name   string   // program and process name
	args   []string // the daemon's arguments (foreground)
	status []string // its status command
	of     func(*Status) *DaemonStatus

	after chan struct{} // closed when the daemon it needs answers (nil: none)
	ready chan struct{} // closed when it first answers
	once  sync.Once

	// Owned by keep, then by runAgent.
	proc          *process
	startedBefore bool
}

func (d *daemon) markReady() { d.once.Do(func() { close(d.ready) }) }

func newWdmd() *daemon {
	return &daemon{name: "wdmd", args: []string{"-D"}, status: wdmdStatus,
		of: func(st *Status) *DaemonStatus { return &st.Wdmd }, ready: make(chan struct{})}
}

// newSanlock runs sanlock in the foreground as root; -w 0 turns the watchdog (and so fencing) off.
func newSanlock(watchdog bool, ioTimeout int) *daemon {
	w := "0"
	if watchdog {
		w = "1"
	}
	return &daemon{name: "sanlock", args: append([]string{"daemon", "-D", "-U", "root", "-G", "root", "-w", w}, ioTimeoutArgs(ioTimeout)...),
		status: sanlockStatus, of: func(st *Status) *DaemonStatus { return &st.Sanlock }, ready: make(chan struct{})}
}

// newLvmlockd runs lvmlockd in the foreground with sanlock and the host ID. --adopt 1 takes over the locks of
// a previous instance that died while holding them (for LVs still active here); with none it starts plainly.
func newLvmlockd(hostID, ioTimeout int) *daemon {
	return &daemon{name: "lvmlockd",
		args:   append([]string{"--foreground", "--gl-type", "sanlock", "--host-id", strconv.Itoa(hostID), "--adopt", "1"}, ioTimeoutArgs(ioTimeout)...),
		status: lvmlockdStatus, of: func(st *Status) *DaemonStatus { return &st.Lvmlockd }, ready: make(chan struct{})}
}

// ioTimeoutArgs sets sanlock's I/O timeout (-o, for both daemons); none for the default.
func ioTimeoutArgs(seconds int) []string {
	if seconds <= 0 {
		return nil
	}
	return []string{"-o", strconv.Itoa(seconds)}
}

// restartBackoff decides how long to wait before starting a daemon again.
type restartBackoff struct {
	initial, cur wait.Backoff
	stableAfter  time.Duration
}

func newRestartBackoff(b wait.Backoff, stableAfter time.Duration) *restartBackoff {
	return &restartBackoff{initial: b, cur: b, stableAfter: stableAfter}
}

// next is the delay after a run that lasted ranFor: the next backoff step, or the first one again when the
// daemon had run long enough to count as healthy.
func (b *restartBackoff) next(ranFor time.Duration) time.Duration {
	if ranFor >= b.stableAfter {
		b.cur = b.initial
	}
	return b.cur.Step()
}
