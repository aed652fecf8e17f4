// This file finds and fetches the kernel: which linux-image-<version> package Debian's linux-image-amd64
// stands for (remembered while apt's lists do not change) and its .deb, downloaded with apt-get download.

package localvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// kernelMetaPackage is the Debian package whose dependency names the current kernel image package.
const kernelMetaPackage = "linux-image-amd64"

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
