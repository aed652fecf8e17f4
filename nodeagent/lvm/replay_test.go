package lvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// execFunc is an Executor made of a function.
type execFunc func(context.Context, Command) (Result, error)

func (f execFunc) Execute(ctx context.Context, cmd Command) (Result, error) { return f(ctx, cmd) }

// TestRecorder_TimedOut records a command killed by its timeout and replays it as the same *TimeoutError,
// with the replaying runner's timeout; a command whose caller gave up is not recorded.
func TestRecorder_TimedOut(t *testing.T) {
	ctx := context.Background()
	const partial = "  printed before the kill\n"
	rec := NewRecorder(execFunc(func(_ context.Context, cmd Command) (Result, error) {
		if cmd.Argv[2] == "vgs" {
			return Result{}, fmt.Errorf("run %s: %w", cmd, context.Canceled)
		}
		// What OSExecutor returns when the command's own timeout killed it.
		return Result{Stderr: []byte(partial)}, &TimeoutError{Command: cmd.String(), After: cmd.Timeout}
	}), "unit test")
	rec.PrefixLen = 1
	r := Runner{Prefix: []string{"p"}, Exec: rec, Timeout: 7 * time.Second}
	if _, err := r.Run(ctx, "lvm", "lvremove", "-y", "vg/lv"); err == nil {
		t.Fatal("the fake's timeout did not fail the command")
	}
	if _, err := r.Run(ctx, "lvm", "vgs"); !errors.Is(err, context.Canceled) {
		t.Fatalf("vgs: %v, want the caller's cancellation", err)
	}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := rec.Session().Save(path); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(path); err != nil || !strings.Contains(string(data), `"timedOut": true`) {
		t.Errorf("saved session (%v):\n%s", err, data)
	}
	s, err := LoadSession(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Session{Source: "unit test", Commands: []Recording{{Argv: []string{"lvm", "lvremove", "-y", "vg/lv"}, Stderr: partial, TimedOut: true}}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("session = %+v, want only the timed-out command", s)
	}

	rp := NewReplay("s.json", s)
	rp.PrefixLen = 2
	r = Runner{Prefix: []string{"nsenter", "--"}, Exec: rp, Timeout: 3 * time.Second}
	res, err := r.Execute(ctx, "lvm", "lvremove", "-y", "vg/lv")
	te, ok := AsTimeout(err)
	switch {
	case !ok || !errors.Is(err, context.DeadlineExceeded):
		t.Errorf("replayed %v, want a *TimeoutError", err)
	case te.Command != "lvm lvremove -y vg/lv" || te.After != 3*time.Second:
		t.Errorf("replayed %+v, want the command without the prefix and the runner's 3s", te)
	case string(res.Stderr) != partial:
		t.Errorf("replayed stderr %q, want %q", res.Stderr, partial)
	}
	if err := rp.Check(); err != nil {
		t.Error(err)
	}
	// Still strict: the recording answers once.
	if _, err := r.Run(ctx, "lvm", "lvremove", "-y", "vg/lv"); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second lvremove: %v, want the replay's violation", err)
	}
	if err := rp.Check(); err == nil || !strings.Contains(err.Error(), "ran more often than the 1 time(s) recorded") {
		t.Errorf("Check = %v", err)
	}
}
