package nodevm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// The host runs commands on a node through files in the VMs' shared directory: request n of node x is
// exec-x-n.json, its answer exec-x-n.result.json (each written whole, then renamed into place). The guest
// runs requests in order, one at a time, each bounded by its timeout. This is how tests look at what the
// node itself sees (lvs, mounts) and act as an administrator on it (restart the kubelet, kill a process).

// guestRequest is one command for a node.
type guestRequest struct {
	// Argv is the command, or a built-in: ["@restart-kubelet"], ["@kill", "<cmdline prefix>"].
	Argv    []string
	Timeout time.Duration
}

// guestResult is what the command did.
type guestResult struct {
	Output string // stdout and stderr
	Error  string // empty when the command exited 0
}

// Built-in guest commands.
const (
	RestartKubelet = "@restart-kubelet" // stop the kubelet, start it again with the same flags
	KillProcesses  = "@kill"            // SIGKILL every process whose command line starts with the argument (NUL-separated)
)

// Run runs argv on the named node (a built-in when it starts with "@") and returns its output; the error
// says how it failed. The command is killed after timeout.
func (ns *Nodes) Run(node string, timeout time.Duration, argv ...string) (string, error) {
	ns.mu.Lock()
	ns.seq[node]++
	n := ns.seq[node]
	ns.mu.Unlock()
	dir := ns.machines.SharedDir()
	req, _ := json.Marshal(guestRequest{Argv: argv, Timeout: timeout})
	if err := writeAtomic(filepath.Join(dir, requestName(node, n)), req); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	if err := ns.machines.WaitSignal(ctx, resultName(node, n)); err != nil {
		return "", fmt.Errorf("node %s did not answer %q: %w", node, strings.Join(argv, " "), err)
	}
	b, err := os.ReadFile(filepath.Join(dir, resultName(node, n)))
	if err != nil {
		return "", err
	}
	var res guestResult
	if err := json.Unmarshal(b, &res); err != nil {
		return "", fmt.Errorf("node %s answered %q with %q: %w", node, strings.Join(argv, " "), b, err)
	}
	if res.Error != "" {
		return res.Output, fmt.Errorf("on node %s, %s: %s", node, strings.Join(argv, " "), res.Error)
	}
	return res.Output, nil
}

func requestName(node string, n int) string { return "exec-" + node + "-" + strconv.Itoa(n) + ".json" }
func resultName(node string, n int) string {
	return "exec-" + node + "-" + strconv.Itoa(n) + ".result.json"
}

// writeAtomic writes a file whole: the reader on the other side of 9p never sees half of it.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// serveGuestRequests is the guest's half: it answers the host's requests for this node until ctx ends.
func serveGuestRequests(ctx context.Context, dir, node string, builtin func(argv []string) (string, error)) {
	for n := 1; ; n++ {
		var b []byte
		for {
			var err error
			if b, err = os.ReadFile(filepath.Join(dir, requestName(node, n))); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
		var req guestRequest
		var res guestResult
		if err := json.Unmarshal(b, &req); err != nil || len(req.Argv) == 0 {
			res.Error = fmt.Sprintf("malformed request %q: %v", b, err)
		} else {
			out, err := runGuestRequest(ctx, req, builtin)
			res.Output = out
			if err != nil {
				res.Error = err.Error()
			}
		}
		out, _ := json.Marshal(res)
		_ = writeAtomic(filepath.Join(dir, resultName(node, n)), out)
	}
}

func runGuestRequest(ctx context.Context, req guestRequest, builtin func(argv []string) (string, error)) (string, error) {
	if strings.HasPrefix(req.Argv[0], "@") {
		return builtin(req.Argv)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	// The node agent's executor: its own process group, killed whole at the timeout.
	res, err := lvm.OSExecutor{}.Execute(ctx, lvm.Command{Argv: req.Argv, Timeout: timeout})
	out := string(res.Stdout) + string(res.Stderr)
	switch {
	case err != nil:
		if _, ok := lvm.AsTimeout(err); ok {
			return out, fmt.Errorf("killed after %s", timeout)
		}
		return out, err
	case res.ExitCode != 0:
		return out, fmt.Errorf("exit status %d", res.ExitCode)
	}
	return out, nil
}

// killByCmdline sends SIGKILL to every process whose command line starts with prefix (arguments separated
// by NUL, as in /proc/<pid>/cmdline) and returns their pids; none is an error.
func killByCmdline(prefix string) (string, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var killed []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.HasPrefix(string(b), prefix) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, strconv.Itoa(pid))
		}
	}
	if len(killed) == 0 {
		return "", errors.New("no process matches " + strconv.Quote(prefix))
	}
	return strings.Join(killed, " "), nil
}
