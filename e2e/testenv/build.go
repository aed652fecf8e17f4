package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/lvms-dev/lvms/buildcache"
)

// BuildLVMS builds the lvms binary and returns the path of a copy of it in the test's temporary directory.
// The build goes to one path per checkout under LVMS_CACHE (lvms-bin/<checkout>/lvms, under its lock), into
// which go build links again only when something the binary is built from changed: a link takes about 5 s of
// CPU, and make test needs the binary a dozen times (tests and the benchmarks' smoke). The test runs its
// copy, which no later build touches.
func BuildLVMS(tb testing.TB) string {
	tb.Helper()
	built, err := lvmsBuilt()
	if err != nil {
		tb.Fatal(err)
	}
	unlock, err := buildcache.Lock(context.Background(), filepath.Dir(built), os.Stderr)
	if err != nil {
		tb.Fatalf("build lvms: %v", err)
	}
	defer unlock()
	if out, err := buildCommand(built).CombinedOutput(); err != nil {
		tb.Fatalf("build lvms: %v: %s", err, out)
	}
	bin := filepath.Join(tb.TempDir(), "lvms")
	if err := copyExecutable(built, bin); err != nil {
		tb.Fatalf("build lvms: %v", err)
	}
	return bin
}

// lvmsBuilt is where BuildLVMS builds the binary for this checkout.
func lvmsBuilt() (string, error) {
	cache, err := buildcache.Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "lvms-bin", fmt.Sprintf("%x", sha256.Sum256([]byte(RepoRoot())))[:12], "lvms"), nil
}

// buildCommand is the go build BuildLVMS runs (extra flags first, for its test).
func buildCommand(out string, extra ...string) *exec.Cmd {
	cmd := exec.Command("go", append(append([]string{"build"}, extra...), "-o", out, "./cmd/lvms")...)
	cmd.Dir = RepoRoot()
	return cmd
}

func copyExecutable(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	return dst.Close()
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
