package lvm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/testtier"
)

// TestOSExecutor_TimeoutKillsProcessGroup runs a real command whose child ignores SIGTERM and keeps the
// output pipe open. The call returns the timeout error naming the command, and the child is dead
// afterwards: the whole process group was killed, and Wait did not wait for the pipe.
func TestOSExecutor_TimeoutKillsProcessGroup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix []string
	}{
		{name: "direct"},
		// nsenter into our own namespaces: the command is a grandchild, as on a node.
		{name: "behind nsenter", prefix: []string{"nsenter", "--target", strconv.Itoa(os.Getpid()), "--mount", "--"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.prefix) > 0 {
				testtier.Needs(t, "root on the host (nsenter)")
				if os.Geteuid() != 0 {
					t.Skip("nsenter needs root")
				}
			}
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			script := `trap "" TERM; sleep 600 & echo $! > ` + pidFile + `; echo started; wait`
			r := Runner{Prefix: tc.prefix, Timeout: time.Second}
			_, err := r.Run(context.Background(), "sh", "-c", script)
			te, ok := AsTimeout(err)
			if !ok || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want a *TimeoutError", err)
			}
			if want := "`sh -c " + script + "` hung: no exit after 1s, so it was killed with its process group"; !strings.HasPrefix(te.Error(), want) {
				t.Errorf("message:\n got %s\nwant %s...", te, want)
			}
			data, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("the child never started: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			// SIGKILL is delivered asynchronously: kill(2) returns before the target has exited, so
			// give the kernel a moment to finish it. A child that survived the signal lives for 600 s.
			if !diesWithin(pid, 10*time.Second) {
				t.Errorf("child %d (sleep 600, ignoring SIGTERM) is still running 10s after the timeout", pid)
			}
		})
	}
}

// diesWithin polls until pid is dead or the limit passes.
func diesWithin(pid int, limit time.Duration) bool {
	for end := time.Now().Add(limit); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// alive reports whether pid runs (a zombie waiting for its reaper is dead).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
