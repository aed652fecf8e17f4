package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// BuildLVMS builds the lvms binary into the test's temporary directory and returns its path.
func BuildLVMS(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "lvms")
	build := exec.Command("go", "build", "-o", bin, "./cmd/lvms")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("build lvms: %v: %s", err, out)
	}
	return bin
}

// StartProcess runs bin with args (and env added to this process's environment) until the test ends, when
// it gets SIGTERM and is waited for; its output is logged if the test failed. It returns the PID. Should the
// process end before, ProcessEnded says so.
func StartProcess(tb testing.TB, bin string, env []string, args ...string) int {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	p := &process{name: filepath.Base(bin) + " " + strings.Join(args, " "), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	pid := cmd.Process.Pid
	go func() { p.err = cmd.Wait(); close(p.done) }()
	started.Store(pid, p)
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
		started.Delete(pid)
		if tb.Failed() {
			tb.Logf("%s:\n%s", p.name, p.out.String())
		}
	})
	return pid
}

// process is one StartProcess started; out and err are read once done is closed.
type process struct {
	name string
	out  bytes.Buffer
	err  error
	done chan struct{}
}

// started are the processes StartProcess started, by PID, until their test ends.
var started sync.Map

// ProcessEnded says, once the process StartProcess started as pid has ended before its test, how it ended
// and the end of what it wrote; "" while it runs. A benchmark waiting on that process's work passes it to
// WaitFor, so that it fails at once when the process is gone instead of waiting out its timeout.
func ProcessEnded(pid int) string {
	v, ok := started.Load(pid)
	if !ok {
		return ""
	}
	p := v.(*process)
	select {
	case <-p.done:
	default:
		return ""
	}
	how := "exit status 0"
	if p.err != nil {
		how = p.err.Error()
	}
	out := p.out.String()
	if len(out) > 4000 {
		out = "…" + out[len(out)-4000:]
	}
	return fmt.Sprintf("%s (pid %d) ended: %s; its output:\n%s", p.name, pid, how, out)
}
