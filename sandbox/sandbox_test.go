package sandbox

import (
	"context"
	"net"
	"strings"
	"testing"
)

func TestLockState_ASecondSandboxOnTheSameStateIsToldOneRuns(t *testing.T) {
	dir := t.TempDir()
	first, err := lockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockState(dir); err == nil || !strings.Contains(err.Error(), "another lvms local is running with state directory "+dir) ||
		!strings.Contains(err.Error(), "--state-dir") {
		t.Fatalf("a second sandbox on %s: %v, want it told one runs and how to use another", dir, err)
	}
	first.Close()
	again, err := lockState(dir)
	if err != nil {
		t.Fatalf("once the first stopped, the state directory is free again: %v", err)
	}
	again.Close()
}

func TestStartConsole_ABusyPortIsNamedWithTheFlagAroundIt(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &sandbox{opts: Options{StateDir: t.TempDir(), ConsoleAddr: l.Addr().String(), Binary: "/nonexistent/lvms"}}
	err = s.startConsole(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the console cannot serve: listen tcp "+l.Addr().String()) || !strings.Contains(err.Error(), "--console-listen") {
		t.Fatalf("console on a busy port: %v, want the address and --console-listen named", err)
	}
	if len(s.stops) != 0 {
		t.Errorf("a console that could not listen left %d things to stop", len(s.stops))
	}
}
