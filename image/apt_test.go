package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// stubAptGet is installed as apt-get: `apt-get download -q name=version...` writes each package's file
// ("deb name=version\n") into the working directory and records the call in $STUB_DIR/downloads. With
// $STUB_BLOCK set, the first download writes part of its first file, says so through the fifo
// $STUB_DIR/started and waits for a line on the fifo $STUB_DIR/release.
const stubAptGet = `#!/usr/bin/env bash
set -euo pipefail
[[ $1 == download ]] || exit 1
shift; [[ $1 == -q ]] && shift
echo "$*" >>"$STUB_DIR/downloads"
for spec in "$@"; do
  file="${spec%%=*}_${spec#*=}_amd64.deb"
  file=${file//:/%3a}
  if [[ -n ${STUB_BLOCK:-} ]] && mkdir "$STUB_DIR/blocked" 2>/dev/null; then
    printf partial >"$file"
    echo started >"$STUB_DIR/started"
    read -r _ <"$STUB_DIR/release"
  fi
  echo "deb $spec" >"$file"
done
`

// stubPackages are what stubAptGet serves, with the SHA-256 of its files.
func stubPackages() []Package {
	pkgs := []Package{{Name: "lvm2", Version: "2.03.16-2", Arch: "amd64"}, {Name: "dmsetup", Version: "2:1.02.185-2", Arch: "amd64"}}
	for i := range pkgs {
		sum := sha256.Sum256([]byte("deb " + pkgs[i].String() + "\n"))
		pkgs[i].SHA256 = hex.EncodeToString(sum[:])
	}
	return pkgs
}

// stubApt puts stubAptGet first on PATH and returns its directory (STUB_DIR).
func stubApt(t *testing.T, block bool) string {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(stubAptGet), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, fifo := range []string{"started", "release"} {
		if err := syscall.Mkfifo(filepath.Join(dir, fifo), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("STUB_DIR", dir)
	if block {
		t.Setenv("STUB_BLOCK", "1")
	} else {
		t.Setenv("STUB_BLOCK", "")
	}
	return dir
}

// awaitStarted returns once the blocked download has written part of a file, failing the test when done is
// closed first.
func awaitStarted(t *testing.T, stub string, done <-chan struct{}) {
	t.Helper()
	got := make(chan struct{})
	go func() { os.ReadFile(filepath.Join(stub, "started")); close(got) }()
	select {
	case <-got:
	case <-done:
		t.Fatal("the fetch ended before its download started")
	}
}

// checkFetched fails the test unless files are the packages' complete files in cache, and nothing
// temporary is left there.
func checkFetched(t *testing.T, cache string, pkgs []Package, files []string) {
	t.Helper()
	if len(files) != len(pkgs) {
		t.Fatalf("got %d files for %d packages", len(files), len(pkgs))
	}
	for i, p := range pkgs {
		if filepath.Dir(files[i]) != cache {
			t.Errorf("%s is not in the cache %s", files[i], cache)
		}
		if b, err := os.ReadFile(files[i]); err != nil || string(b) != "deb "+p.String()+"\n" {
			t.Errorf("%s: %q, %v", files[i], b, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cache, ".tmp.*")); len(left) != 0 {
		t.Errorf("temporary names left in the cache: %v", left)
	}
}

func downloads(t *testing.T, stub string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stub, "downloads"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' })
}

// watch is a log that tests can wait on for a text.
type watch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *watch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(b)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(b), nil
}

// TestFetch_TwoAtOnceDownloadOnce: while one fetch is halfway through downloading, a second into the same
// cache waits on the cache's lock, then finds the files; apt-get ran once and both get the complete files.
func TestFetch_TwoAtOnceDownloadOnce(t *testing.T) {
	stub := stubApt(t, true)
	cache := filepath.Join(t.TempDir(), "debs")
	pkgs := stubPackages()
	type result struct {
		files []string
		err   error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	firstDone, secondDone := make(chan struct{}), make(chan struct{})
	go func() {
		files, err := Fetch(t.Context(), cache, pkgs, &bytes.Buffer{})
		first <- result{files, err}
		close(firstDone)
	}()
	awaitStarted(t, stub, firstDone)
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(cache, debName(p))); err == nil {
			t.Errorf("%s is in the cache while it downloads", debName(p))
		}
	}
	log := &watch{want: "waiting for another process building into " + cache, seen: make(chan struct{})}
	go func() {
		files, err := Fetch(t.Context(), cache, pkgs, log)
		second <- result{files, err}
		close(secondDone)
	}()
	select {
	case <-log.seen:
	case <-secondDone:
		t.Fatalf("the second fetch did not wait for the first: %v", (<-second).err)
	}
	if err := os.WriteFile(filepath.Join(stub, "release"), []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, r := range []result{<-first, <-second} {
		if r.err != nil {
			t.Fatalf("fetch %d: %v", i+1, r.err)
		}
		checkFetched(t, cache, pkgs, r.files)
	}
	if d := downloads(t, stub); len(d) != 1 {
		t.Errorf("apt-get download ran %d times (%q), want once", len(d), d)
	}
}

// TestFetch_AKilledDownloadLeavesNothingTakenAsAPackage: a fetch killed (SIGKILL, with apt-get) halfway
// through a download leaves no file under a package's name, and the next fetch downloads again and succeeds.
func TestFetch_AKilledDownloadLeavesNothingTakenAsAPackage(t *testing.T) {
	if cache := os.Getenv("IMAGE_FETCH_HELPER_CACHE"); cache != "" { // the process the test kills
		Fetch(context.Background(), cache, stubPackages(), os.Stderr)
		t.Fatal("the helper's fetch returned")
	}
	stub := stubApt(t, true)
	cache := filepath.Join(t.TempDir(), "debs")
	pkgs := stubPackages()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFetch_AKilledDownloadLeavesNothingTakenAsAPackage$")
	cmd.Env = append(os.Environ(), "IMAGE_FETCH_HELPER_CACHE="+cache)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
	awaitStarted(t, stub, done)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done

	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(cache, debName(p))); err == nil {
			t.Errorf("the killed fetch left %s in the cache", debName(p))
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cache, ".tmp.*", "*.deb")); len(left) != 1 {
		t.Fatalf("the killed fetch left %v, want its half-written file under a temporary name", left)
	}
	t.Setenv("STUB_BLOCK", "")
	files, err := Fetch(t.Context(), cache, pkgs, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	checkFetched(t, cache, pkgs, files)
	if d := downloads(t, stub); len(d) != 2 {
		t.Errorf("apt-get download ran %d times (%q), want twice: the killed one and the next", len(d), d)
	}
}

// TestFetch_AFileOtherThanPinnedIsNotCached: a download whose SHA-256 differs from the lock's fails and
// leaves nothing in the cache.
func TestFetch_AFileOtherThanPinnedIsNotCached(t *testing.T) {
	stubApt(t, false)
	cache := filepath.Join(t.TempDir(), "debs")
	pkgs := stubPackages()
	pkgs[1].SHA256 = strings.Repeat("0", 64)
	if _, err := Fetch(t.Context(), cache, pkgs, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "packages.lock pins "+pkgs[1].SHA256) {
		t.Fatalf("got %v, want the SHA-256 mismatch", err)
	}
	if _, err := os.Stat(filepath.Join(cache, debName(pkgs[1]))); err == nil {
		t.Errorf("the mismatched %s is in the cache", debName(pkgs[1]))
	}
	if left, _ := filepath.Glob(filepath.Join(cache, ".tmp.*")); len(left) != 0 {
		t.Errorf("temporary names left: %v", left)
	}
}
