package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConsole_Bundle serves a bundle with `lvms console --bundle` and reads its pages as a browser would.
func TestConsole_Bundle(t *testing.T) {
	path := brokenBundle(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	cmd := newRootCommand()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"console", "--bundle", path, "--listen", "127.0.0.1:0"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); _ = pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("lvms console: %v", err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if !strings.Contains(line, "support bundle "+path) || !strings.Contains(line, "read-only") {
		t.Errorf("console says %q", line)
	}
	base := line[strings.Index(line, "http://"):]
	base = strings.Fields(base)[0]
	client := &http.Client{Timeout: 10 * time.Second}
	for path, want := range map[string]string{
		"/":                "Read-only: support bundle",
		"/findings":        "NodeNotReady",
		"/nodes/worker-b":  "worker-b",
		"/api/v1/findings": `"checkName":"NodeNotReady"`,
	} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
}

func TestTUIAndConsole_BadBundle(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "missing.tar.gz")
	for _, args := range [][]string{{"console", "--bundle", bad}, {"tui", "--bundle", bad}} {
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("lvms %s: %v", strings.Join(args, " "), err)
		}
	}
}

// Without a terminal, lvms tui says so in one line and writes no escape codes (issue 23: it printed
// "error creating cancelreader" after terminal control sequences).
func TestTUI_NeedsATerminal(t *testing.T) {
	path := brokenBundle(t, t.TempDir())
	out, err := run(t, "tui", "--bundle", path)
	if !errors.Is(err, errNoTerminal) {
		t.Fatalf("err = %v, want %v", err, errNoTerminal)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("wrote escape codes before failing: %q", out)
	}
}
