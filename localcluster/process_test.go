package localcluster

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// script writes an executable shell script named name into dir.
func script(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// gone reports whether pid no longer runs: it does not exist or is a zombie no one reaped (a container's
// init may not reap orphans).
func gone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

func TestStart_ReportsAComponentThatExits(t *testing.T) {
	bin := t.TempDir()
	script(t, bin, "etcd", `echo "etcd: unknown flag --frobnicate" >&2; exit 3`)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	_, err := Start(ctx, Options{Dir: t.TempDir(), Binaries: Binaries{ControlPlane: bin, Node: bin}})
	if err == nil {
		t.Fatal("Start succeeded with an etcd that exits")
	}
	for _, want := range []string{"etcd exited: exit status 3", "etcd: unknown flag --frobnicate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestStart_NamesAMissingBinary(t *testing.T) {
	_, err := Start(t.Context(), Options{Dir: t.TempDir(), Binaries: Binaries{ControlPlane: t.TempDir(), Node: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "no executable etcd") || !strings.Contains(err.Error(), "e2e/tools/build.sh") {
		t.Errorf("error %v, want one naming etcd and the script that builds it", err)
	}
}

func TestProcess_StopEndsTheWholeGroup(t *testing.T) {
	dir := t.TempDir()
	childPID := filepath.Join(dir, "child.pid")
	script(t, dir, "parent", `sleep 600 & echo $! > `+childPID+`; echo started; wait`)

	p, err := StartProcess(dir, "parent", filepath.Join(dir, "parent"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		data, _ := os.ReadFile(childPID)
		child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("the script did not start its child")
	}

	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if pid := p.cmd.Process.Pid; !gone(pid) {
		t.Errorf("process %d still runs after stop", pid)
	}
	// SIGTERM went to the group, so the child got it too; it may take a moment to be reaped.
	for !gone(child) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !gone(child) {
		t.Errorf("child %d of the process group still runs after stop", child)
	}
	if log := Tail(p.log, 5); !strings.Contains(log, "started") {
		t.Errorf("log %s lacks the script's output:\n%s", p.log, log)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
}
