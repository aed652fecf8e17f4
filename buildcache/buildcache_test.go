package buildcache

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// output is an io.Writer that tests can wait on for a text to appear.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(b)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(b), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// await returns once s has been written; it fails the test when done is closed first.
func (o *output) await(t *testing.T, s string, done <-chan struct{}) {
	t.Helper()
	for {
		o.mu.Lock()
		has, changed := strings.Contains(o.buf.String(), s), o.changed
		o.mu.Unlock()
		if has {
			return
		}
		select {
		case <-changed:
		case <-done:
			if !strings.Contains(o.String(), s) {
				t.Fatalf("ended without writing %q; wrote:\n%s", s, o.String())
			}
			return
		}
	}
}

// build is how a cache user builds an artifact: look, lock, look again, build under a temporary name,
// rename. It counts builds in *builds and waits on release (if not nil) with the artifact half-written.
func build(ctx context.Context, dir string, log *output, builds *atomic.Int32, started chan<- struct{}, release <-chan struct{}) (string, error) {
	artifact := filepath.Join(dir, "artifact")
	if b, err := os.ReadFile(artifact); err == nil {
		return string(b), nil
	}
	unlock, err := Lock(ctx, dir, log)
	if err != nil {
		return "", err
	}
	defer unlock()
	if b, err := os.ReadFile(artifact); err == nil {
		return string(b), nil
	}
	builds.Add(1)
	tmp, err := TempDir(dir, "artifact")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	f, err := os.Create(filepath.Join(tmp, "artifact"))
	if err != nil {
		return "", err
	}
	f.WriteString("half ")
	if started != nil {
		close(started)
		<-release
	}
	f.WriteString("and whole")
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), artifact); err != nil {
		return "", err
	}
	return "half and whole", nil
}

// TestLock_TwoBuildersBuildOnceAndBothGetTheWholeArtifact: the second builder waits on the lock while the
// first has the artifact half-written, then finds it built.
func TestLock_TwoBuildersBuildOnceAndBothGetTheWholeArtifact(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache", "thing")
	var builds atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	type result struct {
		got string
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		got, err := build(t.Context(), dir, newOutput(), &builds, started, release)
		first <- result{got, err}
	}()
	<-started
	if _, err := os.Stat(filepath.Join(dir, "artifact")); err == nil {
		t.Fatal("the half-written artifact is visible under its name")
	}
	log := newOutput()
	secondDone := make(chan struct{})
	go func() {
		got, err := build(t.Context(), dir, log, &builds, nil, nil)
		second <- result{got, err}
		close(secondDone)
	}()
	log.await(t, "waiting for another process building into "+dir, secondDone)
	close(release)
	for _, r := range []result{<-first, <-second} {
		if r.err != nil || r.got != "half and whole" {
			t.Errorf("a builder got %q, %v; want the whole artifact", r.got, r.err)
		}
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tmp.*")); len(left) != 0 {
		t.Errorf("temporary names left: %v", left)
	}
}

// TestLock_CancelledWaitReturnsAndLeavesTheLockUsable: a waiter whose context ends gets the context's error;
// the lock is not left taken for ever by its wait.
func TestLock_CancelledWaitReturnsAndLeavesTheLockUsable(t *testing.T) {
	dir := t.TempDir()
	unlock, err := Lock(t.Context(), dir, newOutput())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	log := newOutput()
	done := make(chan struct{})
	var waitErr error
	go func() {
		_, waitErr = Lock(ctx, dir, log)
		close(done)
	}()
	log.await(t, "waiting for another process", done)
	cancel()
	<-done
	if !errors.Is(waitErr, context.Canceled) {
		t.Fatalf("cancelled wait: got %v, want context.Canceled", waitErr)
	}
	unlock()
	unlock() // twice is harmless
	again, err := Lock(t.Context(), dir, newOutput())
	if err != nil {
		t.Fatalf("lock after the holder released it and the waiter gave up: %v", err)
	}
	again()
}

// TestLock_AKilledBuildLeavesNothingTakenAsBuilt: a process killed (SIGKILL) while it holds the lock with its
// artifact half-written releases the lock by dying; the artifact's name never existed, and the next holder
// removes the half-written temporary and builds.
func TestLock_AKilledBuildLeavesNothingTakenAsBuilt(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "BUILDCACHE_HELPER_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe() // never written: the helper blocks reading it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "half-written\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q, %v", line, err)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()

	left, _ := filepath.Glob(filepath.Join(dir, ".tmp.*"))
	if len(left) != 1 {
		t.Fatalf("the killed build left %v, want its one temporary directory", left)
	}
	if _, err := os.Stat(filepath.Join(dir, "artifact")); err == nil {
		t.Fatal("the killed build's artifact exists under its name")
	}
	var builds atomic.Int32
	got, err := build(t.Context(), dir, newOutput(), &builds, nil, nil)
	if err != nil || got != "half and whole" || builds.Load() != 1 {
		t.Fatalf("the next build: %q, %v, %d builds; want the whole artifact, built once", got, err, builds.Load())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tmp.*")); len(left) != 0 {
		t.Errorf("the next holder of the lock left %v", left)
	}
}

// TestMain runs the test binary as the process TestLock_AKilledBuildLeavesNothingTakenAsBuilt kills when
// BUILDCACHE_HELPER_DIR is set: it builds there and stops with the artifact half-written.
func TestMain(m *testing.M) {
	if dir := os.Getenv("BUILDCACHE_HELPER_DIR"); dir != "" {
		started, release := make(chan struct{}), make(chan struct{})
		go func() {
			<-started
			os.Stdout.WriteString("half-written\n")
			os.Stdin.Read(make([]byte, 1)) // until killed
			close(release)
		}()
		var builds atomic.Int32
		build(context.Background(), dir, newOutput(), &builds, started, release)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func TestDir_IsLVMSCacheElseUnderHome(t *testing.T) {
	t.Setenv("LVMS_CACHE", "/somewhere/cache")
	if d, err := Dir(); err != nil || d != "/somewhere/cache" {
		t.Errorf("with LVMS_CACHE: %q, %v", d, err)
	}
	t.Setenv("LVMS_CACHE", "")
	t.Setenv("HOME", "/home/someone")
	if d, err := Dir(); err != nil || d != "/home/someone/.cache/lvms" {
		t.Errorf("without LVMS_CACHE: %q, %v", d, err)
	}
}
