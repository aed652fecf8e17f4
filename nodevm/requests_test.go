package nodevm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGuestRequests drives the guest's half of GuestRun through a directory, as the host does over 9p.
func TestGuestRequests(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var builtins [][]string
	go serveGuestRequests(ctx, dir, "n1", func(argv []string) (string, error) {
		builtins = append(builtins, argv)
		return "did " + argv[0], nil
	})
	ask := func(n int, req string) guestResult {
		t.Helper()
		if err := writeAtomic(filepath.Join(dir, requestName("n1", n)), []byte(req)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			b, err := os.ReadFile(filepath.Join(dir, resultName("n1", n)))
			if err == nil {
				var res guestResult
				if err := json.Unmarshal(b, &res); err != nil {
					t.Fatal(err)
				}
				return res
			}
			if time.Now().After(deadline) {
				t.Fatalf("request %d unanswered", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	if res := ask(1, `{"Argv":["sh","-c","echo out; echo err >&2"]}`); res.Error != "" || res.Output != "out\nerr\n" {
		t.Errorf("a command's output: %+v", res)
	}
	if res := ask(2, `{"Argv":["sh","-c","exit 3"]}`); !strings.Contains(res.Error, "exit status 3") {
		t.Errorf("a failing command: %+v", res)
	}
	// The timeout kills the whole process group: the sleeping grandchild too.
	pidFile := filepath.Join(dir, "sleeper.pid")
	if res := ask(3, `{"Argv":["sh","-c","sleep 600 & echo $! > `+pidFile+`; wait"],"Timeout":200000000}`); !strings.Contains(res.Error, "killed after 200ms") {
		t.Errorf("a command past its timeout: %+v", res)
	}
	if pid, err := os.ReadFile(pidFile); err != nil {
		t.Error(err)
	} else if stat, alive := stillRunning(strings.TrimSpace(string(pid))); alive {
		t.Errorf("the timed-out command's child %s still runs: %s", pid, stat)
	}
	if res := ask(4, `{"Argv":["@restart-kubelet"]}`); res.Output != "did @restart-kubelet" || len(builtins) != 1 {
		t.Errorf("a built-in: %+v (built-ins called: %v)", res, builtins)
	}
	if res := ask(5, `not json`); !strings.Contains(res.Error, "malformed request") {
		t.Errorf("a malformed request: %+v", res)
	}
	if res := ask(6, `{"Argv":[]}`); !strings.Contains(res.Error, "malformed request") {
		t.Errorf("an empty command: %+v", res)
	}
}

func TestKillByCmdlineNoMatch(t *testing.T) {
	if _, err := killByCmdline("/no-such-program\x00with-args"); err == nil || !strings.Contains(err.Error(), "no process matches") {
		t.Errorf("killByCmdline of nothing: %v", err)
	}
}

// stillRunning reports whether pid lives on (not gone, not a zombie) after a SIGKILL. The signal is sent
// before the result is written, but the kernel may not have torn the process down yet (CI once saw it in
// state R, reparented to init), so it is given up to ten seconds to die.
func stillRunning(pid string) (string, bool) {
	for i := 0; ; i++ {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return "", false
		}
		if i == 200 {
			return string(stat), true
		}
		time.Sleep(50 * time.Millisecond)
	}
}
