package sandbox

import (
	"context"
	"net"
	"os"
	"path/filepath"
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

func TestRun_ABusyConsolePortIsNamedBeforeAnythingStarts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	state := t.TempDir()
	out := &syncBuffer{}
	err = Run(context.Background(), Options{Real: true, StateDir: state, Namespace: RealNamespace, RepoRoot: t.TempDir(),
		Binary: "/nonexistent/lvms", ConsoleAddr: l.Addr().String(), Out: out})
	if err == nil || !strings.Contains(err.Error(), "the console cannot serve: listen tcp "+l.Addr().String()) || !strings.Contains(err.Error(), "--console-listen") {
		t.Fatalf("lvms local with its console's port busy: %v, want the address and --console-listen named", err)
	}
	if strings.Contains(out.String(), "Starting") {
		t.Errorf("the sandbox started before it named the busy port:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(state, "cluster")); err == nil {
		t.Error("a control plane was started before the busy port was named")
	}
}

func TestStartReal_WithoutQemuNamesThePackageAndTheSimulatedSandbox(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no qemu-system-x86_64 anywhere
	s := &sandbox{opts: Options{Real: true, StateDir: t.TempDir(), Binary: "/nonexistent/lvms", Out: &syncBuffer{}}}
	err := s.startReal(context.Background())
	for _, want := range []string{"real nodes need qemu", "qemu-system-x86_64 is not installed", "apt-get install qemu-system-x86", "lvms local --simulated"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("real nodes without qemu: %v, want it to say %q", err, want)
		}
	}
	if len(s.stops)+len(s.cleanup) != 0 {
		t.Errorf("a refused start left %d things to stop or remove", len(s.stops)+len(s.cleanup))
	}
}

func TestEnoughMemory(t *testing.T) {
	topo := RealTopology() // 2 × 3072 MiB and 1024 for the control plane: 7168 MiB
	for _, tc := range []struct {
		name, meminfo string
		want          []string // in the error; none: enough
	}{
		{"enough", "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:    7340032 kB\n", nil},
		{"one MiB short", "MemAvailable:    7339008 kB\n", []string{"need 7168 MiB", "2 node VMs", "has 7167 MiB", "lvms local --simulated"}},
		{"MemFree does not count", "MemFree:   9000000 kB\nMemAvailable:   1048576 kB\n", []string{"has 1024 MiB"}},
		{"malformed", "MemAvailable:    lots kB\n", []string{`MemAvailable "lots" is not a number`}},
		{"no MemAvailable", "MemTotal:  9000000 kB\n", []string{"no MemAvailable line"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "meminfo")
			if err := os.WriteFile(path, []byte(tc.meminfo), 0o644); err != nil {
				t.Fatal(err)
			}
			err := enoughMemory(path, topo)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("enough memory refused: %v", err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("enoughMemory = %v, want it to say %q", err, w)
				}
			}
		})
	}
	if err := enoughMemory(filepath.Join(t.TempDir(), "missing"), topo); err == nil || !strings.Contains(err.Error(), "read the free memory") {
		t.Errorf("no meminfo: %v", err)
	}
}
