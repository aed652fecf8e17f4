package localvm

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/testtier"
)

// aptCacheShow is `apt-cache show --no-all-versions linux-image-amd64` on Debian 12 (trimmed).
const aptCacheShow = `Package: linux-image-amd64
Source: linux-signed-amd64 (6.1.192+2)
Version: 6.1.192-2
Installed-Size: 13
Maintainer: Debian Kernel Team <debian-kernel@lists.debian.org>
Architecture: amd64
Provides: linux-latest-modules-6.1.0-56-amd64, wireguard-modules (= 1.0.0)
Depends: linux-image-6.1.0-56-amd64 (= 6.1.192-2)
Description-en: Linux for 64-bit PCs (meta-package)
`

func TestParseKernelDepends(t *testing.T) {
	p, err := parseKernelDepends(aptCacheShow)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "linux-image-6.1.0-56-amd64" || p.Version != "6.1.192-2" || p.kernelVersion() != "6.1.0-56-amd64" {
		t.Errorf("got %+v (kernel %s)", p, p.kernelVersion())
	}
	p, err = parseKernelDepends("Depends: linux-image-6.12.9-amd64-unsigned | linux-image-6.12.9-amd64, initramfs-tools\n")
	if err != nil || p.Name != "linux-image-6.12.9-amd64-unsigned" || p.Version != "" {
		t.Errorf("alternatives without version: got %+v, %v", p, err)
	}
	if _, err := parseKernelDepends("Package: linux-image-amd64\nDepends: initramfs-tools\n"); err == nil {
		t.Error("no kernel dependency: want an error")
	}
}

func TestStripCompression(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/a.ko": "kernel/a.ko", "kernel/a.ko.xz": "kernel/a.ko", "kernel/a.ko.zst": "kernel/a.ko",
		"kernel/a.ko.gz": "kernel/a.ko",
	} {
		if got := stripCompression(in); got != want {
			t.Errorf("stripCompression(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestImagePathsAndComplete(t *testing.T) {
	dir := t.TempDir()
	img := imagePaths(dir, "6.1.0-56-amd64", "abc")
	if img.Kernel != filepath.Join(dir, "6.1.0-56-amd64", "vmlinuz") ||
		img.Initramfs != filepath.Join(dir, "6.1.0-56-amd64", "initramfs-abc.img") {
		t.Errorf("paths: %+v", img)
	}
	if img.complete() {
		t.Error("complete with no files")
	}
	os.MkdirAll(filepath.Dir(img.Kernel), 0o755)
	os.WriteFile(img.Kernel, []byte("k"), 0o644)
	os.WriteFile(img.Initramfs, nil, 0o644)
	if img.complete() {
		t.Error("complete with an empty initramfs")
	}
	os.WriteFile(img.Initramfs, []byte("i"), 0o644)
	if !img.complete() {
		t.Error("not complete with both files")
	}
	if got := newestCachedKernel(dir); got != "6.1.0-56-amd64" {
		t.Errorf("newestCachedKernel = %q", got)
	}
}

// TestInitScriptSyntax parses init.sh with the busybox shell that runs it in the guest.
func TestInitScriptSyntax(t *testing.T) {
	if _, err := os.Stat(busyboxPath); err != nil {
		testtier.Unavailablef(t, "%s is missing (Debian package busybox-static): cannot check init.sh with the shell that runs it", busyboxPath)
	}
	cmd := exec.Command(busyboxPath, "sh", "-n")
	cmd.Stdin = bytes.NewReader(initScript)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("init.sh: %v: %s", err, out)
	}
	for _, marker := range []string{markerStart, markerExit, markerError, "udev_sync = 0", "DM_DISABLE_UDEV=1", EnvInVM + "=1"} {
		if !strings.Contains(string(initScript), marker) {
			t.Errorf("init.sh does not contain %q", marker)
		}
	}
}

// TestWriteCpioGz archives a small tree and lists it back with cpio.
func TestWriteCpioGz(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		testtier.Unavailable(t, "cpio is not installed (Debian package cpio): cannot build an initramfs")
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "init"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "x"), []byte("x"), 0o644)
	out := filepath.Join(t.TempDir(), "i.img")
	if err := writeCpioGz(t.Context(), dir, out); err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command("sh", "-c", "gzip -dc < "+out+" | cpio -t --quiet").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(list)); strings.Join(got, " ") != "bin bin/x init" {
		t.Errorf("archive lists %v, want [bin bin/x init]", got)
	}
}

// TestResolveKernelPackageMemo: with an up-to-date memo, apt is not asked.
func TestResolveKernelPackageMemo(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(filepath.Join(dir, "kernel-package"), []byte(aptListsStamp()+" linux-image-9.9.9-1-amd64 9.9.9-1\n"))
	p, err := resolveKernelPackage(t.Context(), dir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "linux-image-9.9.9-1-amd64" || p.Version != "9.9.9-1" {
		t.Errorf("got %+v, want the remembered package", p)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".kernel-package-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
