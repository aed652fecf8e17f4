// Package reaper ends what a test binary started when the binary dies without cleaning up: killed with
// SIGKILL, panicking (go test's -timeout ends a binary that way), or ended by a signal. t.Cleanup and
// TestMain never run then, and today's control planes, VMs and loop devices would outlive the run.
//
// Start runs a watchdog beside the binary: the binary re-executed in a session of its own (so a terminal's
// or CI's signal to the binary's process group does not reach it), holding the read end of a pipe whose
// only writer is the binary. When the pipe closes the binary is gone, however it ended, and the watchdog
//
//  1. kills (SIGKILL; the whole process group of a group leader) every process carrying the binary's mark:
//     Start puts a variable with a value unique to the binary into its environment, so every process it
//     starts afterwards inherits it (envtest's etcd and kube-apiserver, localcluster's components, qemu and
//     what qemu runs, node agents), wherever it was reparented and whatever its process group;
//  2. removes each path passed to Remove, after lazily unmounting (MNT_DETACH) anything mounted at or
//     inside it, so the removal never reaches into another file system;
//  3. lazily unmounts whatever is mounted from a loop device backed by a file passed to Detach (or from
//     its partitions), then detaches that device (LOOP_CLR_FD: at once, or when its last user closes it);
//     a device is found by its backing file, never by a name the kernel may have given to another since;
//
// and prints one line to the binary's standard error naming what it ended, unmounted, detached and removed.
// Forget drops a path once the test cleaned it up itself. A binary that exits normally closes the pipe too:
// whatever is still registered or marked then was leaked and is cleaned up (and reported) the same way.
//
// The watchdog is the test binary itself (Linux: /proc/self/exe), so any binary importing this package can
// start it; its init function takes the watchdog's role when the environment says so. It imports only the
// standard library and golang.org/x/sys: e2e/testenv, localcluster, e2e/vm and nodeagent/loopdev import it,
// and it imports nothing of the product.
package reaper

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

const (
	// roleEnv is set (to "1") only in the watchdog's own environment.
	roleEnv = "LVMS_TEST_REAPER"
	// ownerEnv marks the processes a test binary starts: Start sets it in the binary's environment to a
	// value unique to the binary, and every child inherits it.
	ownerEnv = "LVMS_TEST_REAPER_OWNER"
	// registrations is the watchdog's descriptor of the pipe's read end (the first of ExtraFiles).
	registrations = 3
)

func init() {
	if os.Getenv(roleEnv) == "1" {
		os.Exit(serve(os.NewFile(registrations, "registrations"), os.Getenv(ownerEnv)))
	}
}

// message is one registration, a JSON line on the pipe.
type message struct {
	Op   string `json:"op"` // opRemove, opDetach or opForget
	Path string `json:"path"`
}

const (
	opRemove = "remove"
	opDetach = "detach"
	opForget = "forget"
)

var watchdog struct {
	sync.Mutex
	started bool
	err     error
	w       *os.File
	pid     int
}

// Start starts this process's watchdog, once: calling it again returns the first call's result. Every
// process started after it returns carries this process's mark (unless it is given an environment of its
// own without os.Environ()), so helpers that start processes call it first. Remove, Detach and Forget
// call it too.
func Start() error {
	watchdog.Lock()
	defer watchdog.Unlock()
	if !watchdog.started {
		watchdog.started = true
		watchdog.err = start()
	}
	return watchdog.err
}

func start() error {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return fmt.Errorf("test reaper: %w", err)
	}
	// The binary's ID first, so the watchdog can name the binary it outlived.
	token := strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(nonce[:])
	r, w, err := os.Pipe() // close-on-exec: no child but the watchdog holds either end
	if err != nil {
		return fmt.Errorf("test reaper: %w", err)
	}
	if err := os.Setenv(ownerEnv, token); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("test reaper: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"lvms-test-reaper"}
	cmd.Env = append(os.Environ(), roleEnv+"=1")
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("start the test reaper (the test binary re-executed): %w", err)
	}
	r.Close()
	go func() { _ = cmd.Wait() }() // it ends only after this process, unless killed: then reap it
	watchdog.w, watchdog.pid = w, cmd.Process.Pid
	return nil
}

// PID is the watchdog's process ID, 0 before Start.
func PID() int {
	watchdog.Lock()
	defer watchdog.Unlock()
	return watchdog.pid
}

// Remove has the watchdog remove path (os.RemoveAll) if this process ends before Forget(path): call it as
// soon as path exists (or before it does), and Forget once the test removed it.
func Remove(path string) error { return send(opRemove, path) }

// Detach has the watchdog detach every loop device backed by file if this process ends before
// Forget(file), after lazily unmounting what is mounted from it: call it before attaching file.
func Detach(file string) error { return send(opDetach, file) }

// Forget drops every registration of path: the test cleaned it up itself.
func Forget(path string) error { return send(opForget, path) }

func send(op, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("test reaper: %s %s: %w", op, path, err)
	}
	if err := Start(); err != nil {
		return err
	}
	line, err := json.Marshal(message{Op: op, Path: abs})
	if err != nil {
		return err
	}
	watchdog.Lock()
	defer watchdog.Unlock()
	// One write under the lock, so lines never interleave. A registration the write returned from is in the
	// pipe: the watchdog reads it even when this process dies the next instant.
	if _, err := watchdog.w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("tell the test reaper (pid %d) to %s %s: %w", watchdog.pid, op, abs, err)
	}
	return nil
}
