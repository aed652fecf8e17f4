package localvm

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGuestScript renders a script and runs it with a stand-in test binary that prints its environment
// and arguments, so quoting is checked by a real shell.
func TestGuestScript(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake.test")
	os.WriteFile(bin, []byte("#!/bin/sh\nprintf '%s|' \"$PWD\" \"$LVMS_VM_ROLE\" \"$LVMS_VM_SHARED\" \"$LVMS_VM_DISKS\" \"$ODD\" \"$@\"\n"), 0o755)
	script := guestScript(scriptSpec{
		role:    "a",
		serials: []string{"lvms-disk0", "lvms-0123456789ab"},
		env:     map[string]string{"ODD": `it's "quoted" $HOME`, EnvRole: "ignored"},
		dir:     dir,
		binary:  bin,
		args:    []string{"-test.run", "^TestVMX$/^it's$", "-test.v", "-test.count=1", "-test.timeout", "40s"},
	})
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s\nscript:\n%s", err, out, script)
	}
	want := strings.Join([]string{dir, "a", "/lvms-vm/shared", "lvms-disk0 lvms-0123456789ab", `it's "quoted" $HOME`,
		"-test.run", "^TestVMX$/^it's$", "-test.v", "-test.count=1", "-test.timeout", "40s"}, "|") + "|"
	if string(out) != want {
		t.Errorf("script printed\n%s\nwant\n%s\nscript:\n%s", out, want, script)
	}
}

func TestRunDirDisks(t *testing.T) {
	root := t.TempDir()
	exe := filepath.Join(t.TempDir(), "pkg.test")
	os.WriteFile(exe, []byte("binary"), 0o755)
	r, err := newRunDir(root, exe)
	if err != nil {
		t.Fatal(err)
	}
	if r.guestBinary != "/lvms-vm/bin/pkg.test" {
		t.Errorf("guest binary %s", r.guestBinary)
	}
	if b, err := os.ReadFile(filepath.Join(r.share, "bin", "pkg.test")); err != nil || string(b) != "binary" {
		t.Errorf("test binary in the share: %q, %v", b, err)
	}

	lun := filepath.Join(t.TempDir(), "lun.img")
	opts := []Options{
		{Name: "a", Disks: []Disk{{Size: 1 << 20}, {Path: lun, Size: 2 << 20}}},
		{Name: "b", Disks: []Disk{{Path: lun}, {Serial: "mine", Size: 3 << 20}}},
	}
	shared := sharedPaths(opts)
	a, err := r.disks(opts[0], shared)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.disks(opts[1], shared)
	if err != nil {
		t.Fatal(err)
	}
	if a[0].Serial != "lvms-disk0" || a[0].Shared || a[0].Path != filepath.Join(root, "disks", "a-0.img") {
		t.Errorf("private disk of a: %+v", a[0])
	}
	if !a[1].Shared || !b[0].Shared || a[1].Serial != b[0].Serial || !strings.HasPrefix(a[1].Serial, "lvms-") || len(a[1].Serial) > 20 {
		t.Errorf("shared LUN: a %+v, b %+v: want shared, with one serial of at most 20 characters", a[1], b[0])
	}
	if b[1].Serial != "mine" {
		t.Errorf("explicit serial: %+v", b[1])
	}
	for path, size := range map[string]int64{a[0].Path: 1 << 20, lun: 2 << 20, b[1].Path: 3 << 20} {
		if st, err := os.Stat(path); err != nil || st.Size() != size {
			t.Errorf("%s: %v, want %d bytes", path, err, size)
		}
	}
	if _, err := r.disks(Options{Name: "c", Disks: []Disk{{Serial: "x"}, {Serial: "x"}}}, nil); err == nil {
		t.Error("two disks with one serial: want an error")
	}
	path, err := r.writeScript("a", "exit 0\n")
	if err != nil || path != "/lvms-vm/vm-a/run.sh" {
		t.Errorf("writeScript: %s, %v", path, err)
	}
}

func TestWaitSignal(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644)
	if err := waitSignal(ctx, dir, "ready", "b"); err != nil {
		t.Errorf("present signal: %v", err)
	}
	// A peer that exited cleanly does not fail the wait; one that failed does, at once.
	os.WriteFile(filepath.Join(dir, exitedPrefix+"c"), []byte("0\n"), 0o644)
	os.WriteFile(filepath.Join(dir, exitedPrefix+"a"), []byte("1\n"), 0o644)
	if err := waitSignal(ctx, dir, "never", "b"); err == nil || !strings.Contains(err.Error(), "VM a failed (exit 1)") {
		t.Errorf("failed peer: got %v", err)
	}
	// Its own exit record is not a peer's: the wait runs into its deadline.
	short, cancelShort := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancelShort()
	if err := waitSignal(short, dir, "never", "a"); err == nil || !strings.Contains(err.Error(), "no VM signalled") {
		t.Errorf("own exit record: got %v", err)
	}
}

func TestDiskSerials(t *testing.T) {
	sys := t.TempDir()
	for dev, serial := range map[string]string{"vda": "lvms-disk0\n", "vdb": "lvms-0123456789ab", "sda": "other"} {
		os.MkdirAll(filepath.Join(sys, dev), 0o755)
		os.WriteFile(filepath.Join(sys, dev, "serial"), []byte(serial), 0o644)
	}
	os.MkdirAll(filepath.Join(sys, "vdc"), 0o755) // no serial
	got, err := diskSerials(sys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["lvms-disk0"] != "vda" || got["lvms-0123456789ab"] != "vdb" {
		t.Errorf("diskSerials = %v", got)
	}
}

func TestGuestEnv(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "/cache/k8s")
	t.Setenv("LVMS_CACHE", "/cache")
	t.Setenv("SOMETHING_ELSE", "x")
	got := guestEnv(map[string]string{"LVMS_CACHE": "/other", "STEP": "2"})
	want := map[string]string{"KUBEBUILDER_ASSETS": "/cache/k8s", "LVMS_CACHE": "/other", "STEP": "2"}
	if !maps.Equal(got, want) {
		t.Errorf("guestEnv = %v, want %v", got, want)
	}
}

func TestHiddenTop(t *testing.T) {
	for dir, want := range map[string]string{
		"/tmp/ci-clone/e2e/vm": "/tmp/ci-clone",
		"/tmp/x":               "/tmp/x",
		"/run/user/0/repo":     "/run/user",
		"/dev/shm/w/a":         "/dev/shm/w",
		"/work/main/e2e/vm":    "",
		"/tmp/":                "",
		"/tmpfoo/a":            "",
	} {
		if got := hiddenTop(dir); got != want {
			t.Errorf("hiddenTop(%q) = %q, want %q", dir, got, want)
		}
	}
}
