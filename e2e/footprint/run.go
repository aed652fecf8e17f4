package footprint

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is one program of a side, as its pod runs it: restarted when it exits, as kubelet restarts a
// container (after 10 s, kubelet's first back-off).
type Process struct {
	// Side is "lvms" or "topolvm"; Pod the pod it belongs to (its cgroup); Name its container's name.
	Side, Pod, Name string
	// OnNode: the process runs on the measured node in this mode (a managed node does not run the
	// controllers; MicroShift's one node runs everything).
	OnNode bool
	Bin    string
	Args   []string
	// Env is the container's environment; the process gets nothing else but PATH.
	Env []string
	// Endpoints are polled as Prometheus scrapes metrics and kubelet probes health.
	Endpoints []Endpoint

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has exited
	pids     []int         // every process it ran as
	restarts int
	stopping bool
	log      string
	group    *Cgroup
}

// Endpoint is a URL polled with an optional bearer token (HTTPS endpoints serve self-signed certificates).
type Endpoint struct{ URL, Token string }

// restartDelay is how long a container that exited waits to be started again (kubelet's first back-off).
const restartDelay = 10 * time.Second

// PID is the running process's ID.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// PIDs are the IDs of every process it ran as (one more for each restart).
func (p *Process) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pids)
}

// Restarts counts its restarts.
func (p *Process) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// Label is "pod/container".
func (p *Process) Label() string { return p.Pod + "/" + p.Name }

// Start runs p with its output in dir/<pod>-<name>.log, in group. The process gets SIGKILL if the
// benchmark dies first.
func (p *Process) Start(dir string, group *Cgroup) error {
	p.log, p.group = filepath.Join(dir, p.Pod+"-"+p.Name+".log"), group
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked()
}

func (p *Process) startLocked() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "+ %s %s\n", p.Bin, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, p.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Label(), err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	p.pids = append(p.pids, cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "+ exited: %v\n", err)
		f.Close()
		close(done)
		p.restartAfter(done)
	}()
	// Moved at once: the few allocations before this are the runtime's first ones.
	if err := p.group.Add(cmd.Process.Pid); err != nil {
		p.stopping = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return err
	}
	return nil
}

// restartAfter starts the process again restartDelay after the run that closed done ended, unless it is
// being stopped.
func (p *Process) restartAfter(done chan struct{}) {
	time.Sleep(restartDelay)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping || p.done != done {
		return
	}
	p.restarts++
	if err := p.startLocked(); err != nil {
		p.stopping = true // cannot start: stays down, as a container in a crash loop would
	}
}

// Stop ends the process and everything in its process group, for good.
func (p *Process) Stop() {
	p.mu.Lock()
	p.stopping = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Running says whether the process is up now (not between a crash and its restart).
func (p *Process) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// LogTail is the end of the process's output.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Evict drops the page cache of files, so that the first process to run each one reads (and is charged
// for) its pages, as a container started from a freshly pulled image is.
func Evict(files ...string) error {
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return fmt.Errorf("drop the page cache of %s: %w", name, err)
		}
	}
	return nil
}

// Copy copies the executable src to dst: a pod of its own maps its own file (its image's layer), so its
// code pages are shared with no other pod's.
func Copy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Poller requests every endpoint every interval, as Prometheus and kubelet do, and counts the answers.
type Poller struct {
	mu     sync.Mutex
	ok     map[string]int
	failed map[string]string // the last failure of each endpoint
}

// client requests with a timeout; the endpoints serve self-signed certificates, as in a fresh install.
var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// Poll runs until ctx ends.
func (pl *Poller) Poll(ctx context.Context, interval time.Duration, endpoints []Endpoint) {
	c := client
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, e := range endpoints {
			pl.get(ctx, c, e)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once requests every endpoint once more.
func (pl *Poller) Once(ctx context.Context, endpoints []Endpoint) {
	for _, e := range endpoints {
		pl.get(ctx, client, e)
	}
}

func (pl *Poller) get(ctx context.Context, c *http.Client, e Endpoint) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL, nil)
	if err != nil {
		pl.fail(e.URL, err.Error())
		return
	}
	if e.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.Token)
	}
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			pl.fail(e.URL, err.Error())
		}
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		pl.fail(e.URL, resp.Status)
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.ok == nil {
		pl.ok = map[string]int{}
	}
	pl.ok[e.URL]++
}

func (pl *Poller) fail(url, why string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.failed == nil {
		pl.failed = map[string]string{}
	}
	pl.failed[url] = why
}

// Unanswered lists the endpoints that never answered with a 2xx, with their last failure.
func (pl *Poller) Unanswered(endpoints []Endpoint) []string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var out []string
	for _, e := range endpoints {
		if pl.ok[e.URL] == 0 {
			out = append(out, e.URL+": "+pl.failed[e.URL])
		}
	}
	return out
}
