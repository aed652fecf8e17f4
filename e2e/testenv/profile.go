package testenv

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// ProfileDirEnv names the directory benchmarks write heap profiles to (make bench sets it to bench/);
// unset, they write none.
const ProfileDirEnv = "LVMS_BENCH_PROFILE_DIR"

// SaveCPUProfile records seconds of CPU profile of a process serving /debug/pprof at base into name under
// $LVMS_BENCH_PROFILE_DIR; nothing when that is unset.
func SaveCPUProfile(base, name string, seconds int) error {
	return saveProfile(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds), name, time.Duration(seconds+30)*time.Second)
}

// SaveHeapProfile fetches the heap profile of a process serving Go's /debug/pprof at base (for example
// http://127.0.0.1:6060) into name under $LVMS_BENCH_PROFILE_DIR; nothing when that is unset.
func SaveHeapProfile(base, name string) error {
	return saveProfile(base+"/debug/pprof/heap?gc=1", name, 30*time.Second)
}

// SaveAPIServerCPUProfile records seconds of CPU profile of the API server cfg reaches (its /debug/pprof,
// with cfg's credentials) into name under $LVMS_BENCH_PROFILE_DIR; nothing when that is unset.
func SaveAPIServerCPUProfile(cfg *rest.Config, name string, seconds int) error {
	if os.Getenv(ProfileDirEnv) == "" {
		return nil
	}
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	c.Timeout = time.Duration(seconds+30) * time.Second
	return saveProfileWith(c, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(cfg.Host, "/"), seconds), name)
}

func saveProfile(url, name string, timeout time.Duration) error {
	return saveProfileWith(&http.Client{Timeout: timeout}, url, name)
}

func saveProfileWith(c *http.Client, url, name string) error {
	dir := os.Getenv(ProfileDirEnv)
	if dir == "" {
		return nil
	}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// WriteHeapProfile writes this process's heap profile into name under $LVMS_BENCH_PROFILE_DIR; nothing
// when that is unset.
func WriteHeapProfile(name string) error {
	dir := os.Getenv(ProfileDirEnv)
	if dir == "" {
		return nil
	}
	runtime.GC()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// FreeLocalAddr is a 127.0.0.1 address with a port free at the time of the call.
func FreeLocalAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
