package blockcopy_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
)

// A receiver whose progress cannot be written (its file system is full) is told so, and the last mark it
// recorded stays as it was: a resume never starts from a half-written record, nor from a mark that was
// never saved. No temporary file is left behind.
func TestFileProgress_FullFileSystem_SaveFailsAndTheOldMarkStays(t *testing.T) {
	loopdev.NeedsRoot(t) // mounts a tmpfs
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	p := blockcopy.FileProgress{Path: filepath.Join(dir, "progress.json")}
	old := blockcopy.Progress{NextChunk: 7, SHA256: strings.Repeat("ab", 32)}
	if err := p.Save(old); err != nil {
		t.Fatal(err)
	}
	// Fill what is left.
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = filler.Write(make([]byte, 4096))
	}
	filler.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
	}

	err = p.Save(blockcopy.Progress{NextChunk: 8, SHA256: strings.Repeat("cd", 32)})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Save on a full file system: %v, want the ENOSPC it met", err)
	}
	if got, err := p.Load(); err != nil || got != old {
		t.Errorf("the recorded mark after the failed Save: %+v, %v; want the old one %+v", got, err, old)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if name := e.Name(); name != "progress.json" && name != "filler" {
			t.Errorf("left behind: %s", name)
		}
	}
}
