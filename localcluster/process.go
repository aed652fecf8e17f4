package localcluster

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Bounds of Stop: components get termGrace to exit on SIGTERM, then killGrace after SIGKILL.
const (
	termGrace = 10 * time.Second
	killGrace = 5 * time.Second
)

// Process is one running component. done closes once it has exited and been reaped; err is then its exit
// error.
type Process struct {
	name string
	log  string // the path of its output
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess runs bin with args in its own process group, output to dir/<name>.log. Pdeathsig kills it
// if the binary that started it dies without calling Stop, and so does the binary's watchdog (reaper,
// which Start started), so no component outlives the run. The sandbox runs its operator and node agents
// this way too.
func StartProcess(dir, name, bin string, args []string) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logFile, "+ %s %s\n", bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited returns an error naming the component and the end of its log if it is no longer running.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v; end of %s:\n%s", p.name, p.err, p.log, Tail(p.log, 15))
	default:
		return nil
	}
}

// Stop ends the process group: SIGTERM, then SIGKILL after termGrace. It returns once the process is
// reaped, or with an error after killGrace more.
func (p *Process) Stop() error {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
		return nil // reaped: its ID may already belong to someone else
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(termGrace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(killGrace):
		return fmt.Errorf("%s (pid %d) still running %v after SIGKILL", p.name, pgid, killGrace)
	}
}

// Tail returns the last n lines of the file at path, or why it could not be read.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// LogTails returns the last n lines of every component log in dir (a Cluster's Dir, or Options.Dir after a
// failed Start), each under a header naming the file, in name order.
func LogTails(dir string, n int) string {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	slices.Sort(logs)
	var b strings.Builder
	for _, l := range logs {
		fmt.Fprintf(&b, "---- last %d lines of %s ----\n%s\n", n, l, Tail(l, n))
	}
	return b.String()
}

// FreePorts returns n distinct ports free on 127.0.0.1 right now. Another process could take one before the
// component binds it; the component then fails to start and says so in its log.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		defer l.Close() // held until all are chosen, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// PID is the process's ID (and its process group's).
func (p *Process) PID() int { return p.cmd.Process.Pid }
