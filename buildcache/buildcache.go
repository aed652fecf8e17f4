// Package buildcache makes the caches under $LVMS_CACHE (default ~/.cache/lvms) safe when two processes fill
// them at once: two `make` commands, two test binaries. Each cached artifact has a directory; its builders
// serialise on a lock file in it (Lock: the second one waits, then finds the artifact built), build under a
// temporary name in the same directory (TempDir) and publish with a rename, so a reader never sees a
// half-written artifact and a build killed midway leaves only a temporary name, which the next holder of
// the lock removes. e2e/tools/lib.sh does the same for the shell scripts (same lock file, same temporary
// names), and this package's tests run those scripts too.
//
// Users: the image's Debian packages (image.Fetch, $LVMS_CACHE/debs) and the VM lane's kernel and
// initramfs (e2e/vm Prepare, $LVMS_CACHE/vm).
package buildcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Dir is the cache's root: $LVMS_CACHE, else ~/.cache/lvms.
func Dir() (string, error) {
	if c := os.Getenv("LVMS_CACHE"); c != "" {
		return c, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory: set LVMS_CACHE or HOME: %w", err)
	}
	return filepath.Join(home, ".cache", "lvms"), nil
}

// LockName is the lock file Lock takes in an artifact's directory.
const LockName = ".lock"

// tempPrefix starts every temporary name TempDir makes; only the holder of the directory's lock makes them,
// so once Lock holds it, any left are a killed build's.
const tempPrefix = ".tmp."

// Lock creates dir and takes an exclusive flock(2) on dir/.lock. While another process holds it, Lock says
// so on log and waits, until it gets the lock or ctx ends. Once held, it removes the temporary names
// (TempDir) a killed build left in dir. The returned function releases the lock; the lock is also released
// when the process ends, however it ends. Callers check for the finished artifact again once they hold it.
func Lock(ctx context.Context, dir string, log io.Writer) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the cache directory: %w", err)
	}
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the cache lock: %w", err)
	}
	err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		fmt.Fprintf(log, "waiting for another process building into %s (lock %s)\n", dir, path)
		got := make(chan error, 1)
		go func() { got <- flock(f, syscall.LOCK_EX) }()
		select {
		case err = <-got:
		case <-ctx.Done():
			go func() { <-got; f.Close() }() // closing releases the lock should the wait still get it
			return nil, fmt.Errorf("wait for the cache lock %s: %w", path, ctx.Err())
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	for _, l := range left {
		os.RemoveAll(l)
	}
	var once sync.Once
	return func() { once.Do(func() { f.Close() }) }, nil
}

func flock(f *os.File, how int) error {
	for {
		if err := syscall.Flock(int(f.Fd()), how); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// TempDir makes a new directory in dir to build name in: rename what is built out of it into dir once it is
// complete, and remove it. Call it while holding dir's lock.
func TempDir(dir, name string) (string, error) {
	tmp, err := os.MkdirTemp(dir, tempPrefix+name+".")
	if err != nil {
		return "", fmt.Errorf("create a build directory: %w", err)
	}
	return tmp, nil
}
