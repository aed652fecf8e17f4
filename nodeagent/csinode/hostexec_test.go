package csinode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mountutil "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// TestHostExec_FormatMountUnmount formats, mounts and unmounts a loop device with the node service's
// default mounter and exec: every blkid, mkfs, mount and umount goes through its runner (the recorder
// sees them), and blkid's "no file system" exit code still reaches mount-utils.
func TestHostExec_FormatMountUnmount(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	dev := loopdev.Attach(t, dir, 64<<20, false)
	rec := lvm.NewRecorder(lvm.OSExecutor{}, "test")
	r := lvm.Runner{Exec: rec}
	node := NewNode(Options{Runner: r})
	sfm, mounter := node.mounter, node.opts.Mounter

	if format, err := sfm.GetDiskFormat(dev); err != nil || format != "" {
		t.Fatalf("GetDiskFormat of an empty device = %q, %v; want no file system", format, err)
	}
	target := filepath.Join(dir, "mnt")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := sfm.FormatAndMount(dev, target, "ext4", nil); err != nil {
		t.Fatal(err)
	}
	if mounted, err := mounter.IsMountPoint(target); err != nil || !mounted {
		t.Fatalf("%s mounted = %v, %v", target, mounted, err)
	}
	if err := mountutil.CleanupMountPoint(target, mounter, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target after cleanup: %v, want it unmounted and removed", err)
	}
	var ran []string
	for _, c := range rec.Session().Commands {
		ran = append(ran, c.Argv[0])
	}
	for _, want := range []string{"blkid", "mkfs.ext4", "mount", "umount"} {
		if !slices.Contains(ran, want) {
			t.Errorf("%s did not go through the runner; ran %v", want, ran)
		}
	}
}

// TestHostExec_Timeout: a hung file system command returns the runner's timeout error through
// mount-utils' exec interface.
func TestHostExec_Timeout(t *testing.T) {
	h := HostExec{Runner: lvm.Runner{Timeout: 500 * time.Millisecond}}
	out, err := h.Command("sh", "-c", `trap "" TERM; sleep 600 & wait`).CombinedOutput()
	te, ok := lvm.AsTimeout(err)
	if !ok || !strings.Contains(te.Error(), "hung: no exit after 500ms") {
		t.Fatalf("err = %v (output %q), want the runner's timeout error", err, out)
	}
	var exitErr utilexec.ExitError
	if errors.As(err, &exitErr) {
		t.Error("a timeout must not look like an exit code to mount-utils")
	}
	if err := h.CommandContext(context.Background(), "sh", "-c", "exit 2").Run(); err == nil {
		t.Error("exit 2: no error")
	} else if ee, ok := err.(utilexec.ExitError); !ok || ee.ExitStatus() != 2 {
		t.Errorf("exit 2: %v, want a utilexec.ExitError with status 2", err)
	}
}

// TestHostMounter_FailedMount_IsAnError: a mount(8) that exits non-zero (here: a source that does not exist) is
// an error naming its exit status and what mount said, never a success.
func TestHostMounter_FailedMount_IsAnError(t *testing.T) {
	target := t.TempDir()
	m := NewHostMounter(lvm.Runner{Timeout: 30 * time.Second})
	err := m.Mount(filepath.Join(target, "no-such-device"), target, "ext4", nil)
	if err == nil {
		_ = m.Unmount(target)
		t.Fatal("mounting a device that does not exist succeeded")
	}
	if !strings.Contains(err.Error(), "exit status") {
		t.Errorf("%v: want the exit status of mount", err)
	}
}
