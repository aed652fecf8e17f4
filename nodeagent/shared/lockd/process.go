package lockd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// process is a daemon the agent started: the leader of its own process group (nsenter, when there is a
// prefix, and the daemon with all its children), so that stopping it reaches all of them.
type process struct {
	cmd  *exec.Cmd
	out  *tail
	done chan struct{} // closed when it exited; err is then set
	err  error
}

// pipeWait bounds how long Wait waits for the output pipes after the process exited (a child that left the
// group could hold them).
const pipeWait = 5 * time.Second

// startProcess starts name with args the way the runner runs commands (prefix, LC_ALL=C, its environment),
// but without a timeout: a daemon runs until it is stopped.
func startProcess(r lvm.Runner, name string, args []string) (*process, error) {
	argv := slices.Concat(r.Prefix, []string{name}, args)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Environ(), "LC_ALL=C")
	cmd.Env = append(cmd.Env, r.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &process{cmd: cmd, out: &tail{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.WaitDelay = pipeWait
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the whole process group.
func (p *process) signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", p.cmd.Process.Pid, err)
	}
	return nil
}

// killStragglers kills what is left of the process group once its leader exited (behind nsenter --pid, the
// daemon outlives a killed nsenter). A group's ID is not reused while a member lives.
func (p *process) killStragglers() {
	if p.groupAlive() {
		_ = p.signal(syscall.SIGKILL)
	}
}

// exitError says how the process ended, with the last line it wrote. Call it after done.
func (p *process) exitError(name string) error {
	how := "exited"
	if p.err != nil {
		how = p.err.Error()
	}
	if last := p.out.lastLine(); last != "" {
		return fmt.Errorf("%s (pid %d) %s; its last output: %s", name, p.cmd.Process.Pid, how, last)
	}
	return fmt.Errorf("%s (pid %d) %s", name, p.cmd.Process.Pid, how)
}

// daemonPID finds the daemon in the process group (behind nsenter --pid it is nsenter's child): the lowest
// PID whose command name is name. The group's leader when it finds none.
func (p *process) daemonPID(name string) int {
	leader := p.cmd.Process.Pid
	for _, m := range groupMembers(leader) {
		if m.comm == name {
			return m.pid
		}
	}
	return leader
}

// groupAlive tells whether a process of the group still runs (zombies do not count). Behind nsenter --pid,
// the daemon outlives nsenter, which dies of SIGTERM at once.
func (p *process) groupAlive() bool { return len(groupMembers(p.cmd.Process.Pid)) > 0 }

type member struct {
	pid  int
	comm string
}

// groupMembers lists the live processes of a process group, lowest PID first, from /proc.
func groupMembers(pgrp int) []member {
	entries, err := os.ReadDir("/proc") // sorted by name, not by PID
	if err != nil {
		return nil
	}
	var ms []member
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, state, g, ok := procStat(pid); ok && g == pgrp && state != "Z" {
			ms = append(ms, member{pid, comm})
		}
	}
	slices.SortFunc(ms, func(a, b member) int { return a.pid - b.pid })
	return ms
}

// procStat reads a process's command name, state and process group from /proc/<pid>/stat.
func procStat(pid int) (comm, state string, pgrp int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", "", 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses, so cut at the last ')'.
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return "", "", 0, false
	}
	fields := strings.Fields(string(b[closing+1:]))
	if len(fields) < 3 {
		return "", "", 0, false
	}
	pgrp, err = strconv.Atoi(fields[2])
	return string(b[open+1 : closing]), fields[0], pgrp, err == nil
}

// tail keeps the end of a daemon's output, for the error that says why it stopped.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4096

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = slices.Delete(t.buf, 0, over)
	}
	return len(b), nil
}

func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
