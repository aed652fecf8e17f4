package sharedvm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockspace"
)

// TestVMSharedVolumes proves the shared volume semantics the shared CSI driver builds on, with real lvm2,
// sanlock and lvmlockd on two VMs sharing a LUN:
//   - ReadWriteOnce: a volume active exclusively on A cannot be activated on B (a LockedError); once A
//     deactivates it, B activates it and reads what A wrote (same checksum);
//   - ReadWriteMany block: a volume active shared on A and B at once; A writes with O_DIRECT, B reads the
//     same checksum with O_DIRECT (what VM live migration needs);
//   - deletion only when inactive everywhere: removal is refused while B has it active, then succeeds.
func TestVMSharedVolumes(t *testing.T) {
	if vm.InGuest() {
		volumesGuest(t)
		return
	}
	_, _, opts := startCluster(t, []string{"node-a", "node-b"}, filepath.Join(t.TempDir(), "lun.img"))
	vm.RunMany(t, opts)
}

const (
	rwo       = "rwo"
	rwx       = "rwx"
	volSize   = 64 << 20
	dataBytes = 4 << 20
)

func devPath(lv string) string { return "/dev/mapper/" + sharedVG + "-" + lv }

func volumesGuest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	g := joinSharedVG(t, ctx)
	data := make([]byte, dataBytes)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	want := sha256.Sum256(data)

	switch g.node {
	case "node-a":
		must(t, g.l.CreateLV(ctx, sharedVG, rwo, volSize))
		must(t, g.l.CreateLV(ctx, sharedVG, rwx, volSize))
		must(t, g.l.Activate(ctx, sharedVG, rwo, lockspace.Exclusive))
		writeDirect(t, devPath(rwo), data)
		vm.Signal(t, "a-holds-rwo")

		vm.WaitSignal(t, "b-refused")
		must(t, g.l.Deactivate(ctx, sharedVG, rwo))
		vm.Signal(t, "a-released-rwo")

		must(t, g.l.Activate(ctx, sharedVG, rwx, lockspace.Shared))
		vm.WaitSignal(t, "b-shares-rwx") // active on both now
		writeDirect(t, devPath(rwx), data)
		vm.Signal(t, "a-wrote-rwx")
		vm.WaitSignal(t, "b-read-rwx")

		must(t, g.l.Deactivate(ctx, sharedVG, rwx))
		err := g.l.RemoveLV(ctx, sharedVG, rwx) // B still has it active
		var locked *lockspace.LockedError
		if !errors.As(err, &locked) {
			t.Fatalf("remove %s while node-b has it active: %v, want a LockedError", rwx, err)
		}
		t.Logf("removal refused while node-b has it active: %v", err)
		vm.Signal(t, "a-remove-refused")
		vm.WaitSignal(t, "b-released-rwx")
		must(t, g.l.RemoveLV(ctx, sharedVG, rwx))
		must(t, g.l.RemoveLV(ctx, sharedVG, rwo))
		vm.Signal(t, "a-removed")
	case "node-b":
		vm.WaitSignal(t, "a-holds-rwo")
		err := g.l.Activate(ctx, sharedVG, rwo, lockspace.Exclusive)
		var locked *lockspace.LockedError
		if !errors.As(err, &locked) {
			t.Fatalf("activate %s exclusively while node-a holds it: %v, want a LockedError", rwo, err)
		}
		if _, statErr := os.Stat(devPath(rwo)); statErr == nil {
			t.Fatalf("%s is active here although the activation was refused", rwo)
		}
		t.Logf("exclusive activation refused while node-a holds it: %v", err)
		vm.Signal(t, "b-refused")

		vm.WaitSignal(t, "a-released-rwo")
		must(t, g.l.Activate(ctx, sharedVG, rwo, lockspace.Exclusive))
		if got := sha256.Sum256(readDirect(t, devPath(rwo), dataBytes)); got != want {
			t.Fatalf("%s on node-b: checksum %x, node-a wrote %x", rwo, got, want)
		}
		t.Logf("%s moved from node-a to node-b with the same checksum %x", rwo, want[:8])
		must(t, g.l.Deactivate(ctx, sharedVG, rwo))

		must(t, g.l.Activate(ctx, sharedVG, rwx, lockspace.Shared))
		vm.Signal(t, "b-shares-rwx")
		vm.WaitSignal(t, "a-wrote-rwx")
		if got := sha256.Sum256(readDirect(t, devPath(rwx), dataBytes)); got != want {
			t.Fatalf("%s read on node-b while active on both: checksum %x, node-a wrote %x", rwx, got, want)
		}
		t.Logf("%s active on both nodes: node-b reads node-a's O_DIRECT write, checksum %x", rwx, want[:8])
		vm.Signal(t, "b-read-rwx")

		vm.WaitSignal(t, "a-remove-refused")
		must(t, g.l.Deactivate(ctx, sharedVG, rwx))
		vm.Signal(t, "b-released-rwx")
		vm.WaitSignal(t, "a-removed")
	}
	together(t, "done")
	if err := g.l.Stop(ctx, sharedVG); err != nil {
		t.Logf("leave the lockspace: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// alignedBuffer returns n bytes aligned for O_DIRECT.
func alignedBuffer(n int) []byte {
	const align = 4096
	b := make([]byte, n+align)
	off := 0
	if r := int(uintptrOf(b) % align); r != 0 {
		off = align - r
	}
	return b[off : off+n]
}

func writeDirect(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuffer(len(data))
	copy(buf, data)
	if _, err := f.Write(buf); err != nil {
		t.Fatalf("O_DIRECT write to %s: %v", path, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func readDirect(t *testing.T, path string, n int) []byte {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuffer(n)
	if _, err := f.Read(buf); err != nil {
		t.Fatalf("O_DIRECT read of %s: %v", path, err)
	}
	return bytes.Clone(buf)
}

// uintptrOf is the address of a buffer's first byte, to align buffers for O_DIRECT.
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
