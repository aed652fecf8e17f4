package image

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

// Fetch returns the package files, downloading what the cache lacks with apt-get download, and checks
// each file's SHA-256 against the lock. Two processes fetching into one cache at once download once: the
// downloader holds the cache's lock (buildcache.Lock; the other waits, saying so on log, then finds the
// files), downloads into a temporary directory in it and moves each file into the cache only once its SHA-256
// is the pinned one, so a download killed midway leaves nothing later taken for a package.
func Fetch(ctx context.Context, cache string, pkgs []Package, log io.Writer) ([]string, error) {
	files := make([]string, len(pkgs))
	for i, p := range pkgs {
		files[i] = filepath.Join(cache, debName(p))
	}
	missing := func() (idx []int) {
		for i := range pkgs {
			if _, err := os.Stat(files[i]); err != nil {
				idx = append(idx, i)
			}
		}
		return idx
	}
	if len(missing()) > 0 {
		unlock, err := buildcache.Lock(ctx, cache, log)
		if err != nil {
			return nil, err
		}
		defer unlock()
		if m := missing(); len(m) > 0 { // else another process fetched them while this one waited
			if err := download(ctx, cache, pkgs, m); err != nil {
				return nil, err
			}
		}
	}
	for i, p := range pkgs {
		sum, err := fileSHA256(files[i])
		if err != nil {
			return nil, err
		}
		if sum != p.SHA256 {
			return nil, fmt.Errorf("%s: SHA-256 %s, packages.lock pins %s (delete the file to download it again)", files[i], sum, p.SHA256)
		}
	}
	return files, nil
}

// debName is the file name apt-get download gives a package.
func debName(p Package) string {
	return fmt.Sprintf("%s_%s_%s.deb", p.Name, strings.ReplaceAll(p.Version, ":", "%3a"), p.Arch)
}

// download fetches pkgs[i] for each i in missing into a temporary directory in cache and moves each file
// whose SHA-256 is the pinned one into cache. The caller holds cache's lock.
func download(ctx context.Context, cache string, pkgs []Package, missing []int) error {
	tmp, err := buildcache.TempDir(cache, "debs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	names := make([]string, len(missing))
	for j, i := range missing {
		names[j] = pkgs[i].String()
	}
	get := func() error { return run(ctx, tmp, "apt-get", append([]string{"download", "-q"}, names...)...) }
	if err := get(); err != nil {
		// Stale or absent package lists: refresh them once.
		if uerr := run(ctx, tmp, "apt-get", "update", "-qq"); uerr != nil {
			return fmt.Errorf("%w; apt-get update: %v", err, uerr)
		}
		if err := get(); err != nil {
			return fmt.Errorf("%w: the machine's apt sources do not serve a pinned version; run `make image-lock` to pin what they serve, and commit image/packages.lock", err)
		}
	}
	for _, i := range missing {
		p := pkgs[i]
		got := filepath.Join(tmp, debName(p))
		sum, err := fileSHA256(got)
		if err != nil {
			return fmt.Errorf("apt-get download %s: %w", p, err)
		}
		if sum != p.SHA256 {
			return fmt.Errorf("apt-get download %s: SHA-256 %s, packages.lock pins %s", p, sum, p.SHA256)
		}
		if err := os.Rename(got, filepath.Join(cache, debName(p))); err != nil {
			return err
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func run(ctx context.Context, dir, name string, args ...string) error {
	_, err := output(ctx, dir, name, args...)
	return err
}

func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Resolve pins roots and everything they depend on (minus excluded) to the versions the machine's apt
// sources serve.
func Resolve(ctx context.Context, roots []string, excluded map[string]bool) ([]Package, error) {
	seen := map[string]bool{}
	queue := append([]string(nil), roots...)
	var pkgs []Package
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] || excluded[name] {
			continue
		}
		seen[name] = true
		deps, err := output(ctx, "", "apt-cache", "depends", "--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks",
			"--no-replaces", "--no-enhances", name)
		if err != nil {
			return nil, err
		}
		queue = append(queue, Depends(deps)...)
		show, err := output(ctx, "", "apt-cache", "show", "--no-all-versions", name)
		if err != nil {
			return nil, err
		}
		p := Package{Name: name}
		for _, l := range strings.Split(show, "\n") {
			k, v, _ := strings.Cut(l, ": ")
			switch k {
			case "Version":
				p.Version = v
			case "Architecture":
				p.Arch = v
			case "SHA256":
				p.SHA256 = v
			}
		}
		if p.Version == "" || p.SHA256 == "" {
			return nil, fmt.Errorf("apt-cache show %s: no version or SHA256", name)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}
