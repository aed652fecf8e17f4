// This file prepares what a VM boots: Debian's kernel (fetched with apt-get download) and an initramfs made
// of busybox-static, the kernel modules the lane needs and init.sh. Both are cached per kernel version under
// CacheDir(); preparation builds into a temporary directory, publishes with rename and holds a lock file so
// that concurrent test processes neither race nor see half-written files.

package vm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

//go:embed init.sh
var initScript []byte

// kernelMetaPackage is the Debian package whose dependency names the current kernel image package.
const kernelMetaPackage = "linux-image-amd64"

// busyboxPath is where Debian's busybox-static installs its binary.
const busyboxPath = "/bin/busybox"

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
	if c := os.Getenv("LVMS_CACHE"); c != "" {
		return filepath.Join(c, "vm"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory: set LVMS_CACHE or HOME: %w", err)
	}
	return filepath.Join(home, ".cache", "lvms", "vm"), nil
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

	unlock, err := lockFile(ctx, filepath.Join(cacheDir, ".lock"), log)
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

// kernelPackage is a versioned Debian kernel image package.
type kernelPackage struct {
	Name    string // linux-image-6.1.0-56-amd64
	Version string // 6.1.192-2
}

// kernelVersion is the kernel release the package installs.
func (p kernelPackage) kernelVersion() string { return strings.TrimPrefix(p.Name, "linux-image-") }

// parseKernelDepends finds the linux-image-<version> package in `apt-cache show` output of the meta package.
func parseKernelDepends(show string) (kernelPackage, error) {
	for _, line := range strings.Split(show, "\n") {
		deps, ok := strings.CutPrefix(line, "Depends:")
		if !ok {
			continue
		}
		for _, d := range strings.Split(deps, ",") {
			d = strings.TrimSpace(strings.Split(d, "|")[0])
			name, rest, _ := strings.Cut(d, " ")
			if !strings.HasPrefix(name, "linux-image-") || name == kernelMetaPackage {
				continue
			}
			p := kernelPackage{Name: name}
			if v, ok := strings.CutPrefix(strings.TrimSpace(rest), "(="); ok {
				p.Version = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), ")"))
			}
			return p, nil
		}
	}
	return kernelPackage{}, fmt.Errorf("no linux-image-<version> dependency in apt-cache show %s", kernelMetaPackage)
}

// aptLists is where apt keeps its package lists.
const aptLists = "/var/lib/apt/lists"

// resolveKernelPackage asks apt which kernel image package linux-image-amd64 stands for, running apt-get
// update once when the package lists are missing. The answer is remembered in cacheDir/kernel-package
// for as long as apt's package lists do not change (apt-cache takes most of a second).
func resolveKernelPackage(ctx context.Context, cacheDir string, log io.Writer) (kernelPackage, error) {
	memo := filepath.Join(cacheDir, "kernel-package")
	if b, err := os.ReadFile(memo); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 && f[0] == aptListsStamp() {
			return kernelPackage{Name: f[1], Version: f[2]}, nil
		}
	}
	show := func() (kernelPackage, error) {
		out, err := command(ctx, "", "apt-cache", "show", "--no-all-versions", kernelMetaPackage)
		if err != nil {
			return kernelPackage{}, err
		}
		return parseKernelDepends(out)
	}
	p, err := show()
	if err != nil {
		fmt.Fprintf(log, "vm: apt does not know %s (%v); running apt-get update\n", kernelMetaPackage, err)
		if _, uerr := command(ctx, "", "apt-get", "update", "-qq"); uerr != nil {
			return kernelPackage{}, fmt.Errorf("find the kernel package: %w (apt-get update: %w)", err, uerr)
		}
		if p, err = show(); err != nil {
			return kernelPackage{}, fmt.Errorf("find the kernel package after apt-get update: %w", err)
		}
	}
	if p.Version != "" {
		writeAtomic(memo, []byte(aptListsStamp()+" "+p.Name+" "+p.Version+"\n"))
	}
	return p, nil
}

// aptListsStamp identifies the current state of apt's package lists (names, sizes, times).
func aptListsStamp() string {
	entries, _ := os.ReadDir(aptLists)
	h := sha256.New()
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			fmt.Fprintf(h, "%s %d %d\n", e.Name(), info.Size(), info.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
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

// lockFile takes an exclusive flock on path, polling so that ctx can cancel the wait. The returned function
// releases it.
func lockFile(ctx context.Context, path string, log io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the cache lock %s: %w", path, err)
	}
	waiting := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waiting {
			fmt.Fprintf(log, "vm: waiting for another process preparing the VM image (%s)\n", path)
			waiting = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the cache lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// build fetches the kernel package (unless its .deb is cached), unpacks it, builds the initramfs and
// publishes vmlinuz, the .deb and the initramfs into the kernel's cache directory.
func build(ctx context.Context, cacheDir string, pkg kernelPackage, img *Image, log io.Writer) error {
	if err := checkStatic(busyboxPath); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(cacheDir, ".build-")
	if err != nil {
		return fmt.Errorf("create a build directory: %w", err)
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

// fetchDeb returns the cached .deb of pkg in dir, downloading it with apt-get download when missing.
func fetchDeb(ctx context.Context, dir, tmp string, pkg kernelPackage, log io.Writer) (string, error) {
	cached, _ := filepath.Glob(filepath.Join(dir, pkg.Name+"_*.deb"))
	for _, c := range cached {
		if pkg.Version == "" || strings.Contains(filepath.Base(c), "_"+strings.ReplaceAll(pkg.Version, ":", "%3a")+"_") {
			return c, nil
		}
	}
	spec := pkg.Name
	if pkg.Version != "" {
		spec += "=" + pkg.Version
	}
	fmt.Fprintf(log, "vm: downloading %s\n", spec)
	dl := filepath.Join(tmp, "download")
	if err := os.MkdirAll(dl, 0o755); err != nil {
		return "", fmt.Errorf("create the download directory: %w", err)
	}
	args := []string{"download", "-qq"}
	if os.Geteuid() == 0 {
		// The _apt sandbox user cannot write into our directory; as root, apt would warn and download anyway.
		args = append(args, "-o", "APT::Sandbox::User=root")
	}
	if _, err := command(ctx, dl, "apt-get", append(args, spec)...); err != nil {
		return "", fmt.Errorf("download the kernel package %s: %w", spec, err)
	}
	got, _ := filepath.Glob(filepath.Join(dl, pkg.Name+"_*.deb"))
	if len(got) != 1 {
		return "", fmt.Errorf("apt-get download %s left %d matching .deb files, want 1", spec, len(got))
	}
	for _, c := range cached {
		os.Remove(c)
	}
	dst := filepath.Join(dir, filepath.Base(got[0]))
	if err := os.Rename(got[0], dst); err != nil {
		return "", fmt.Errorf("cache %s: %w", filepath.Base(dst), err)
	}
	return dst, nil
}

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
