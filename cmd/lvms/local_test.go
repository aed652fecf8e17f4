package main

import (
	"strings"
	"testing"
)

func TestLocal_PrintStatusWithoutASandboxSaysHowToStartOne(t *testing.T) {
	_, err := run(t, "local", "--print-status", "--state-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no running sandbox found") || !strings.Contains(err.Error(), "lvms local") {
		t.Fatalf("err = %v, want it to say there is no sandbox and how to start one", err)
	}
}

func TestLocal_RepoRootIsFoundFromTheWorkingDirectory(t *testing.T) {
	root, err := repoRoot("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repoRoot(root); err != nil {
		t.Fatalf("repoRoot found %q, which is not a checkout: %v", root, err)
	}
	if _, err := repoRoot(t.TempDir()); err == nil || !strings.Contains(err.Error(), "has no deploy/crds") {
		t.Errorf("a --repo without CRDs: err = %v", err)
	}
}
