package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/testtier"
)

// TestLVMDRefusesMissingVolumeGroups: like TopoLVM's lvmd, lvms lvmd does not start for device classes
// whose volume group is not on the node, and says which. It runs the host's lvm2 (read-only fullreport).
func TestLVMDRefusesMissingVolumeGroups(t *testing.T) {
	testtier.Needs(t, "root and lvm2 on the host")
	if _, err := exec.LookPath("lvm"); err != nil {
		testtier.Unavailable(t, "lvm2 is not installed (Debian package lvm2): the check needs lvm fullreport")
	}
	if os.Getuid() != 0 && os.Getenv("SKIP_TESTS_USING_ROOT") == "" {
		t.Fatal("lvm fullreport needs root: run as root or set SKIP_TESTS_USING_ROOT=1")
	} else if os.Getuid() != 0 {
		testtier.Unavailable(t, "SKIP_TESTS_USING_ROOT is set: lvm fullreport needs root")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "lvmd.yaml")
	if err := os.WriteFile(cfg, []byte("device-classes:\n  - name: ssd\n    volume-group: lvms-test-no-such-vg\n    default: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCommand()
	cmd.SetArgs([]string{"lvmd", "--config", cfg, "--socket", filepath.Join(dir, "lvmd.sock")})
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "lvms-test-no-such-vg, which does not exist on this node") {
		t.Fatalf("lvms lvmd: %v; want a refusal naming the missing volume group", err)
	}
}
