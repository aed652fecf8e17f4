package vm_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/lvms-dev/lvms/e2e/vm"
)

// sh runs a command in the guest and fails the test when it fails; it returns the combined output.
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	code, out := shCode(t, name, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit code %d: %s", name, strings.Join(args, " "), code, out)
	}
	return out
}

// shCode runs a command and returns its exit code and combined output; it fails the test only when the
// command cannot be started at all.
func shCode(t *testing.T, name string, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exitErr):
		return exitErr.ExitCode(), string(out)
	default:
		t.Fatalf("run %s: %v", name, err)
		return -1, ""
	}
}

// guestDisks returns the VM's disks and fails unless there are n.
func guestDisks(t *testing.T, n int) []string {
	t.Helper()
	disks, err := vm.Disks()
	if err != nil {
		t.Fatal(err)
	}
	if len(disks) != n {
		t.Fatalf("got disks %v, want %d", disks, n)
	}
	return disks
}

// randomData returns n pseudo-random bytes that differ per seed.
func randomData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeSynced writes data to path and fsyncs it.
func writeSynced(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// assertFile fails unless path holds exactly want.
func assertFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: read %d bytes that differ from the %d bytes expected", path, len(got), len(want))
	}
}

// fsSize returns the size in bytes of the file system mounted at dir.
func fsSize(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * uint64(st.Bsize)
}

// mount mounts dev at a new directory and unmounts it when the test ends (if still mounted).
func mount(t *testing.T, dev string, opts ...string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{}
	if len(opts) > 0 {
		args = append(args, "-o", strings.Join(opts, ","))
	}
	sh(t, "mount", append(args, dev, dir)...)
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}
