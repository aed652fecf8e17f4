// This file prepares what a VM boots, Debian's kernel and an initramfs, and caches both per kernel version
// under CacheDir(): kernelpkg.go finds and fetches the kernel package, initramfs.go builds the initramfs.
// Preparation holds the cache's lock (buildcache.Lock on CacheDir()/.lock: one build at a time, as a build
// also removes the kernels Debian has replaced), builds in a temporary directory (buildcache.TempDir, removed
// by the next holder of the lock when a build is killed) and publishes each file with a rename, so that
// concurrent test processes neither race nor see half-written files.

package localvm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lvms-dev/lvms/buildcache"
)

// imageFormat changes whenever the layout of the initramfs changes in a way the hash below does not see.
const imageFormat = "lvms-vm-initramfs-1"

// Image is a prepared kernel and initramfs.
type Image struct {
	// KernelVersion is the kernel release, e.g. "6.1.0-56-amd64" (the name of /lib/modules/<version>).
	KernelVersion string
	// Kernel is the path of the kernel image (vmlinuz).
	Kernel string
	// Initramfs is the path of the gzip-compressed newc cpio archive booted with the kernel.
	Initramfs string
}

// CacheDir is where prepared images live: ${LVMS_CACHE:-$HOME/.cache/lvms}/vm.
func CacheDir() (string, error) {
	root, err := buildcache.Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "vm"), nil
}

// Prepare returns the kernel and initramfs for the kernel Debian currently ships as linux-image-amd64,
// building them into cacheDir/<kernel-version>/ when they are not there yet. Progress is written to log.
// When the package lists are missing it runs apt-get update once; when apt cannot name a kernel at all (no
// network, no lists) it falls back to the newest kernel already in the cache.
func Prepare(ctx context.Context, cacheDir string, log io.Writer) (*Image, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("create the VM cache directory: %w", err)
	}
	hash, err := initramfsHash()
	if err != nil {
		return nil, err
	}
	pkg, pkgErr := resolveKernelPackage(ctx, cacheDir, log)
	var kver string
	if pkgErr == nil {
		kver = pkg.kernelVersion()
	} else {
		kver = newestCachedKernel(cacheDir)
		if kver == "" {
			return nil, pkgErr
		}
		fmt.Fprintf(log, "vm: %v; using the cached kernel %s\n", pkgErr, kver)
	}
	img := imagePaths(cacheDir, kver, hash)
	if img.complete() {
		return img, nil
	}
	if pkgErr != nil {
		return nil, fmt.Errorf("the cached kernel %s has no initramfs %s and it cannot be rebuilt: %w", kver, filepath.Base(img.Initramfs), pkgErr)
	}

	unlock, err := buildcache.Lock(ctx, cacheDir, log)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if img.complete() { // another process built it while we waited
		return img, nil
	}
	start := time.Now()
	fmt.Fprintf(log, "vm: preparing kernel %s and initramfs %s under %s\n", kver, filepath.Base(img.Initramfs), cacheDir)
	if err := build(ctx, cacheDir, pkg, img, log); err != nil {
		return nil, fmt.Errorf("prepare the VM image for kernel %s: %w", kver, err)
	}
	fmt.Fprintf(log, "vm: kernel and initramfs ready in %s\n", time.Since(start).Round(100*time.Millisecond))
	return img, nil
}

// imagePaths names the cached files of one kernel version and initramfs hash.
func imagePaths(cacheDir, kver, hash string) *Image {
	dir := filepath.Join(cacheDir, kver)
	return &Image{
		KernelVersion: kver,
		Kernel:        filepath.Join(dir, "vmlinuz"),
		Initramfs:     filepath.Join(dir, "initramfs-"+hash+".img"),
	}
}

// complete reports whether both files exist.
func (img *Image) complete() bool {
	for _, p := range []string{img.Kernel, img.Initramfs} {
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
			return false
		}
	}
	return true
}

// initramfsHash identifies the initramfs content that does not come from the kernel package: the init
// script, the module lists and busybox. A change to any of them builds a new initramfs.
func initramfsHash() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", imageFormat, initScript)
	fmt.Fprintf(h, "%s\x00%s\x00", strings.Join(bootModules(), ","), strings.Join(extraModules(), ","))
	f, err := os.Open(busyboxPath)
	if err != nil {
		return "", fmt.Errorf("open %s (Debian package busybox-static): %w", busyboxPath, err)
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", busyboxPath, err)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// writeAtomic replaces path with data through a temporary file and rename; failures only cost a later
// recomputation, so they are ignored.
func writeAtomic(path string, data []byte) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(0o644)
	}
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
		os.Remove(f.Name())
	}
}

// newestCachedKernel returns the newest kernel version with a kernel image in the cache, or "".
func newestCachedKernel(cacheDir string) string {
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return ""
	}
	var best string
	var bestTime time.Time
	for _, e := range entries {
		st, err := os.Stat(filepath.Join(cacheDir, e.Name(), "vmlinuz"))
		if err == nil && st.ModTime().After(bestTime) {
			best, bestTime = e.Name(), st.ModTime()
		}
	}
	return best
}

// build fetches the kernel package (unless its .deb is cached), unpacks it, builds the initramfs and
// publishes vmlinuz, the .deb and the initramfs into the kernel's cache directory.
func build(ctx context.Context, cacheDir string, pkg kernelPackage, img *Image, log io.Writer) error {
	if err := checkStatic(busyboxPath); err != nil {
		return err
	}
	tmp, err := buildcache.TempDir(cacheDir, "build")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Dir(img.Kernel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}

	deb, err := fetchDeb(ctx, dir, tmp, pkg, log)
	if err != nil {
		return err
	}
	root := filepath.Join(tmp, "pkg")
	if _, err := command(ctx, "", "dpkg", "-x", deb, root); err != nil {
		return fmt.Errorf("unpack %s: %w", filepath.Base(deb), err)
	}
	kver := img.KernelVersion
	if _, err := command(ctx, "", "depmod", "-b", root, kver); err != nil {
		return fmt.Errorf("depmod the unpacked kernel: %w", err)
	}
	modDir := filepath.Join(root, "lib", "modules", kver)
	ix, err := readModuleIndex(modDir)
	if err != nil {
		return err
	}
	boot, err := ix.loadOrder(bootModules())
	if err != nil {
		return fmt.Errorf("resolve the boot modules: %w", err)
	}
	all, err := ix.loadOrder(append(bootModules(), extraModules()...))
	if err != nil {
		return fmt.Errorf("resolve the on-demand modules: %w", err)
	}

	stage := filepath.Join(tmp, "initramfs")
	if err := stageInitramfs(ctx, stage, modDir, kver, boot, all); err != nil {
		return err
	}
	initramfs := filepath.Join(tmp, "initramfs.img")
	if err := writeCpioGz(ctx, stage, initramfs); err != nil {
		return err
	}

	// Publish: each rename is atomic, and readers only look for complete files.
	vmlinuz := filepath.Join(root, "boot", "vmlinuz-"+kver)
	if err := os.Rename(vmlinuz, img.Kernel); err != nil {
		return fmt.Errorf("publish the kernel: %w", err)
	}
	if err := os.Rename(initramfs, img.Initramfs); err != nil {
		return fmt.Errorf("publish the initramfs: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "initramfs-*.img"))
	for _, o := range old {
		if o != img.Initramfs {
			os.Remove(o)
		}
	}
	// Kernels Debian has since replaced go too (running VMs keep their open files).
	others, _ := filepath.Glob(filepath.Join(cacheDir, "*", "vmlinuz"))
	for _, o := range others {
		if d := filepath.Dir(o); d != dir {
			fmt.Fprintf(log, "vm: removing the replaced kernel %s from the cache\n", filepath.Base(d))
			os.RemoveAll(d)
		}
	}
	return nil
}

// copyFile copies src to dst with mode perm.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	return nil
}

// command runs name with args in dir and returns its stdout; the error carries stderr.
func command(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}
