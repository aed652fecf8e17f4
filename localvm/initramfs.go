// This file builds the initramfs: busybox-static, init.sh and the kernel modules the lane needs
// (decompressed, with their own depmod indexes), archived as a gzip-compressed newc cpio.

package localvm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed init.sh
var initScript []byte

// busyboxPath is where Debian's busybox-static installs its binary.
const busyboxPath = "/bin/busybox"

// readModuleIndex parses modules.dep and modules.builtin in a /lib/modules/<version> directory.
func readModuleIndex(modDir string) (*moduleIndex, error) {
	dep, err := os.Open(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("open modules.dep: %w", err)
	}
	defer dep.Close()
	var builtin io.Reader
	if b, err := os.Open(filepath.Join(modDir, "modules.builtin")); err == nil {
		defer b.Close()
		builtin = b
	}
	return parseModuleIndex(dep, builtin)
}

// stageInitramfs lays out the initramfs tree: /init, /bin/busybox, the modules (decompressed, with their
// own depmod indexes so modprobe works in the guest) and /etc/lvms-vm/modules, the boot load order.
func stageInitramfs(ctx context.Context, stage, modDir, kver string, boot, all []string) error {
	dst := filepath.Join(stage, "lib", "modules", kver)
	for _, d := range []string{filepath.Join(stage, "bin"), filepath.Join(stage, "etc", "lvms-vm"), dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("stage the initramfs: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(stage, "init"), initScript, 0o755); err != nil {
		return fmt.Errorf("stage init: %w", err)
	}
	if err := copyFile(busyboxPath, filepath.Join(stage, "bin", "busybox"), 0o755); err != nil {
		return err
	}
	staged := func(p string) string { return stripCompression(p) }
	for _, p := range all {
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(p)), 0o755); err != nil {
			return fmt.Errorf("stage module %s: %w", p, err)
		}
		if err := decompressModule(ctx, filepath.Join(modDir, p), filepath.Join(dst, staged(p))); err != nil {
			return err
		}
	}
	for _, f := range []string{"modules.builtin", "modules.builtin.modinfo", "modules.order"} {
		if err := copyFile(filepath.Join(modDir, f), filepath.Join(dst, f), 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if _, err := command(ctx, "", "depmod", "-b", stage, kver); err != nil {
		return fmt.Errorf("depmod the initramfs modules: %w", err)
	}
	var order bytes.Buffer
	for _, p := range boot {
		fmt.Fprintln(&order, staged(p))
	}
	if err := os.WriteFile(filepath.Join(stage, "etc", "lvms-vm", "modules"), order.Bytes(), 0o644); err != nil {
		return fmt.Errorf("stage the module list: %w", err)
	}
	return nil
}

// stripCompression turns "x.ko.xz" (or .zst, .gz) into "x.ko".
func stripCompression(p string) string {
	for _, s := range []string{".xz", ".zst", ".gz"} {
		if strings.HasSuffix(p, ".ko"+s) {
			return strings.TrimSuffix(p, s)
		}
	}
	return p
}

// decompressModule writes the uncompressed module src to dst: busybox insmod does not read compressed ones.
func decompressModule(ctx context.Context, src, dst string) error {
	var tool string
	switch {
	case strings.HasSuffix(src, ".xz"):
		tool = "xz"
	case strings.HasSuffix(src, ".zst"):
		tool = "zstd"
	case strings.HasSuffix(src, ".gz"):
		tool = "gzip"
	default:
		return copyFile(src, dst, 0o644)
	}
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("stage module %s: %w", filepath.Base(dst), err)
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, tool, "-dc", src)
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("decompress %s with %s: %w: %s", filepath.Base(src), tool, err, strings.TrimSpace(stderr.String()))
	}
	return out.Close()
}

// writeCpioGz archives the tree at dir as a gzip-compressed newc cpio (root-owned entries) at dst.
func writeCpioGz(ctx context.Context, dir, dst string) error {
	var list bytes.Buffer
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel != "." {
			paths = append(paths, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list the initramfs tree: %w", err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		list.WriteString(p + "\n")
	}
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("create the initramfs: %w", err)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	zw := gzip.NewWriter(bw)
	cmd := exec.CommandContext(ctx, "cpio", "--create", "--format=newc", "--owner=0:0", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = &list
	cmd.Stdout = zw
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cpio the initramfs (Debian package cpio): %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress the initramfs: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write the initramfs: %w", err)
	}
	return f.Close()
}

// checkStatic fails unless path is a statically linked ELF binary (it runs alone in the initramfs).
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("read %s (Debian package busybox-static): %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: install Debian package busybox-static", path)
		}
	}
	return nil
}
