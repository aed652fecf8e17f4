package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// it gets SIGTERM and is waited for; its output is logged if the test failed. It returns the PID.
func StartProcess(tb testing.TB, bin string, env []string, args ...string) int {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if tb.Failed() {
			tb.Logf("%s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), out.String())
		}
	})
	return cmd.Process.Pid
}
