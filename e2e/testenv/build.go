package testenv

import (
	"os/exec"
	"path/filepath"
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
