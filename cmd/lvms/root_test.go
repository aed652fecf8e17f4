package main

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestHelp_ListsEverySubcommand(t *testing.T) {
	out, err := run(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"operator", "nodeagent", "lvmd", "console", "tui", "bundle", "analyze", "migrate", "local", "version"} {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("lvms --help does not list %q:\n%s", name, out)
		}
	}
}

func TestVersion_PrintsVersionCommitAndGo(t *testing.T) {
	out, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lvms " + version, "commit: " + commit, "go: " + runtime.Version()} {
		if !strings.Contains(out, want) {
			t.Errorf("lvms version output lacks %q:\n%s", want, out)
		}
	}
}

func TestNotYet_SaysSo(t *testing.T) {
	root := newRootCommand()
	root.AddCommand(notYet("frobnicate", "x"))
	root.SetArgs([]string{"frobnicate", "--any", "flag"})
	root.SetOut(io.Discard)
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "lvms frobnicate is not yet available") || exitCode(err) != 1 {
		t.Fatalf("got %v", err)
	}
}
