package blockdev_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/blockdev/blockdevtest"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
)

// TestReadSysfs_MatchesLsblk lists the live host's block devices both ways — reading /sys, udev's database
// and the mount table, and running lsblk as the agent did before — and requires the same devices with the
// same columns: a partitioned disk with a mounted file system, a swap device, read-only devices (losetup -r
// and blockdev --setro), an empty one, and the host's own disks. Devices other tests attach meanwhile are
// not compared.
func TestReadSysfs_MatchesLsblk(t *testing.T) {
	loopdev.RequireRoot(t)
	dir := loopdev.Dir(t)
	disk, part := loopdev.AttachPartitioned(t, dir, 96<<20)
	loopdev.Run(t, "mkfs.ext4", "-q", part)
	mnt := filepath.Join(dir, "mount point") // a space: the mount table escapes it
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	loopdev.Run(t, "mount", part, mnt)
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	plain := loopdev.Attach(t, dir, 32<<20, false)
	ro := loopdev.Attach(t, dir, 32<<20, true)
	setro := loopdev.Attach(t, dir, 32<<20, false)
	loopdev.Run(t, "blockdev", "--setro", setro)
	t.Cleanup(func() { _ = exec.Command("blockdev", "--setrw", setro).Run() })
	swap := loopdev.Attach(t, dir, 32<<20, false)
	loopdev.Run(t, "mkswap", "-q", swap)
	swapOn := exec.Command("swapon", swap).Run() == nil // a container may not allow it
	if swapOn {
		t.Cleanup(func() { _ = exec.Command("swapoff", swap).Run() })
	}
	ours := []string{disk, part, plain, ro, setro, swap}

	compared := func(kname string) bool {
		return slices.Contains(ours, kname) || !strings.HasPrefix(kname, "/dev/loop")
	}
	g := blockdevtest.MatchLsblk(t, compared)
	for _, k := range ours {
		if _, ok := g[k]; !ok {
			t.Fatalf("%s is not listed; listed: %v", k, slices.Sorted(maps.Keys(g)))
		}
	}
	// What the filters rely on, said plainly.
	if d := g[part]; !slices.Contains(d.MountPoints, mnt) || d.Type != blockdev.TypePart || !slices.Equal(d.Parents, []string{disk}) {
		t.Errorf("partition %s: type %q, mounts %q, parents %q; want a part on %s mounted at %q", part, d.Type, d.MountPoints, d.Parents, disk, mnt)
	}
	if !slices.Equal(g[disk].Children, []string{part}) {
		t.Errorf("disk %s: children %q, want %q", disk, g[disk].Children, part)
	}
	if !g[ro].ReadOnly || !g[setro].ReadOnly || g[plain].ReadOnly {
		t.Errorf("read-only: %s %v, %s %v, %s %v; want true, true, false", ro, g[ro].ReadOnly, setro, g[setro].ReadOnly, plain, g[plain].ReadOnly)
	}
	if swapOn && !slices.Equal(g[swap].MountPoints, []string{"[SWAP]"}) {
		t.Errorf("swap %s: mounts %q, want [SWAP]", swap, g[swap].MountPoints)
	}
}
