package nodevm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A real line from a guest's kubelet, and one whose name holds ") (" as a process may set it.
	for _, c := range []struct {
		line string
		comm string
		cpu  time.Duration
	}{
		{"412 (kubelet) S 1 412 412 0 -1 4194560 10305 2202 0 0 1520 310 40 25 20 0 14 0 812 1377644544 14391 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 0 0 0 0 0 0",
			"kubelet", 18950 * time.Millisecond},
		{"7 (a) (b) R 1 7 7 0 -1 0 0 0 0 0 100 0 0 0 20 0 1 0", "a) (b", time.Second},
	} {
		p, err := parseStat(c.line)
		if err != nil || p.comm != c.comm || p.cpu != c.cpu {
			t.Errorf("parseStat(%q) = %+v, %v; want %s %s", c.line, p, err, c.comm, c.cpu)
		}
	}
	for _, bad := range []string{"", "412 kubelet S 1", "412 (kubelet) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 -5 0 0 0 20"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

func TestCPUReport_SumsByCommandBusiestFirst(t *testing.T) {
	proc := t.TempDir()
	for pid, line := range map[string]string{
		"10": "10 (shim) S 1 1 1 0 -1 0 0 0 0 0 100 0 0 0 20",
		"11": "11 (shim) S 1 1 1 0 -1 0 0 0 0 0 150 0 0 0 20",
		"12": "12 (kubelet) S 1 1 1 0 -1 0 0 0 0 0 200 0 0 0 20",
		"13": "13 (lvms) S 1 1 1 0 -1 0 0 0 0 0 10 0 40 0 20",
		"14": "garbage",
	} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "stat"), []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(proc, "13", "cmdline"), []byte("/lvms\x00nodeagent\x00--v=2\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "12", "cmdline"), []byte("/usr/bin/kubelet\x00--config\x00k.yaml\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := cpuReport(proc, 2)
	if want := "CPU of the running processes 5s in all: shim 2.5s, kubelet 2s"; got != want {
		t.Errorf("cpuReport = %q, want %q", got, want)
	}
	if !strings.Contains(cpuReport(proc, 9), "lvms nodeagent 500ms") {
		t.Errorf("the children's time is not counted: %s", cpuReport(proc, 9))
	}
}
