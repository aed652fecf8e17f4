package loopdev

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/reaper"
	"github.com/lvms-dev/lvms/testtier"
)

// RequireRoot fails the test unless it runs as root with lvm2 and losetup, or skips it when
// SKIP_TESTS_USING_ROOT=1 says so explicitly, or under -short (make check's fast tier), even as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	NeedsRoot(t)
	if os.Getenv("SKIP_TESTS_USING_ROOT") == "1" {
		testtier.Unavailable(t, "this test needs root for loop devices and lvm2, and SKIP_TESTS_USING_ROOT=1 is set")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (loop devices, lvm2); run it as root or set SKIP_TESTS_USING_ROOT=1 to skip it")
	}
	for _, bin := range []string{"losetup", "lvm", "wipefs", "lsblk"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("this test needs %s (Debian packages lvm2, util-linux): %v", bin, err)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testtier.Unavailablef(t, "this test needs loop devices and /dev/loop-control is missing (%v): load the loop module (modprobe loop)", err)
	}
}

// NeedsRoot skips the test under -short (make check): it needs root on the host (loop devices, lvm2, other
// daemons), which is not part of the fast tier. RequireRoot calls it; so does Attach, for tests that check
// root their own way.
func NeedsRoot(t testing.TB) {
	t.Helper()
	testtier.Needs(t, "root on the host (loop devices, lvm2)")
}

// Prefix returns a short name unique to this test and process, for volume groups and devices files
// ("lt" + 8 hex digits).
func Prefix(t testing.TB) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%d", t.Name(), os.Getpid(), time.Now().UnixNano())))
	return "lt" + hex.EncodeToString(sum[:4])
}

// Attach creates a sparse file of size bytes in dir and attaches it as a loop device (read-only when ro).
// The device is detached when the test ends, after every cleanup registered later (volume groups).
func Attach(t testing.TB, dir string, size int64, ro bool) string {
	t.Helper()
	var args []string
	if ro {
		args = append(args, "-r")
	}
	return attach(t, dir, size, nil, args...)
}

// attach attaches a sparse file of size bytes that starts with head as a loop device, with extra losetup
// arguments.
func attach(t testing.TB, dir string, size int64, head []byte, extra ...string) string {
	t.Helper()
	NeedsRoot(t)
	f, err := os.CreateTemp(dir, "disk-*.img")
	if err != nil {
		t.Fatal(err)
	}
	name := f.Name()
	// Before losetup: a binary killed while the device is attached leaves it to its watchdog, which
	// unmounts what is mounted from it and detaches it.
	watch(t, reaper.Detach(name))
	err = f.Truncate(size)
	if err == nil {
		_, err = f.WriteAt(head, 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	ro := slices.Contains(extra, "-r")
	args := append([]string{"-f", "--show"}, extra...)
	out, err := exec.Command("losetup", append(args, name)...).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup %s: %v: %s", name, err, out)
	}
	dev := strings.TrimSpace(string(out))
	if !ro {
		// A read-only flag set with blockdev --setro stays on the loop device after it is detached.
		_ = exec.Command("blockdev", "--setrw", dev).Run()
	}
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("detach %s: %v: %s", dev, err, out)
			return
		}
		forget(t, name)
	})
	return dev
}

// Detach detaches a loop device now (a disk that disappears); the cleanup Attach registered then only
// reports that it is gone.
func Detach(t testing.TB, dev string) {
	t.Helper()
	if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
		t.Fatalf("detach %s: %v: %s", dev, err, out)
	}
}

// Runner returns an lvm.Runner with its own devices file named after prefix and agent, removed (with
// every volume group it holds) when the test ends. Register it after attaching the loop devices so that
// it runs first.
func Runner(t testing.TB, prefix, agent string, exec lvm.Executor) lvm.Runner {
	t.Helper()
	r := lvm.Runner{DevicesFile: prefix + "-" + agent + ".devices", Exec: exec}
	ctx := context.Background()
	if err := r.EnsureDevicesFile(ctx); err != nil {
		t.Fatal(err)
	}
	plain := lvm.Runner{DevicesFile: r.DevicesFile}
	watch(t, reaper.Remove(plain.DevicesFilePath()))
	// Cleanups run last-registered first: volume groups go before the devices file that scopes them.
	t.Cleanup(func() {
		_ = os.Remove(plain.DevicesFilePath())
		forget(t, plain.DevicesFilePath())
	})
	t.Cleanup(func() { CleanupVGs(t, plain, prefix) })
	return r
}

// CleanupVGs removes every volume group whose name starts with prefix that the runner sees, and the LVM
// labels of its devices and of orphan PVs in its scope.
func CleanupVGs(t testing.TB, r lvm.Runner, prefix string) {
	ctx := context.Background()
	if r.DevicesFile == "" {
		t.Error("cleanup: refusing to clean up without a devices file (it would see every device on the host)")
		return
	}
	if _, err := os.Stat(r.DevicesFilePath()); err != nil {
		return // without its devices file lvm2 would see every device on the host
	}
	rep, err := r.FullReport(ctx)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, vg := range rep.VGs {
		if !strings.HasPrefix(vg.Name, prefix) {
			continue
		}
		if _, err := r.LVMCmd(ctx, "vgremove", "-f", "-y", vg.Name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	var pvs []string
	for _, pv := range rep.PVs {
		if pv.VGName == "" || strings.HasPrefix(pv.VGName, prefix) {
			pvs = append(pvs, pv.Name)
		}
	}
	if len(pvs) > 0 {
		if _, err := r.LVMCmd(ctx, "pvremove", append([]string{"-y", "-ff"}, pvs...)...); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// Dir returns a directory for disk files that is removed when the test ends (after the loop devices).
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lvms-loop-")
	if err != nil {
		t.Fatal(err)
	}
	watch(t, reaper.Remove(dir))
	t.Cleanup(func() {
		os.RemoveAll(dir)
		forget(t, dir)
	})
	return filepath.Clean(dir)
}

// watch fails the test when its watchdog (reaper) could not be told what to clean up should the test
// binary die.
func watch(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// forget tells the watchdog that the test cleaned path up itself (from a cleanup: it reports, never ends
// the test).
func forget(t testing.TB, path string) {
	if err := reaper.Forget(path); err != nil {
		t.Error(err)
	}
}

// Run runs a command and fails the test when it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ByIDLink makes a /dev/disk/by-id link to dev, as udev would for a real disk (loop devices get none), and
// removes it (and the directories it created) when the test ends. Forced wipes accept only such names.
func ByIDLink(t testing.TB, dev string) string {
	t.Helper()
	dir := "/dev/disk/by-id"
	var created []string
	for _, d := range []string{"/dev/disk", dir} {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			created = append(created, d)
		}
	}
	link := filepath.Join(dir, "lvms-test-"+filepath.Base(dev))
	_ = os.Remove(link)
	watch(t, reaper.Remove(link))
	if err := os.Symlink("../../"+filepath.Base(dev), link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Remove(link)
		forget(t, link)
		for i := len(created) - 1; i >= 0; i-- {
			_ = os.Remove(created[i]) // only when empty: another test's links stay
		}
	})
	return link
}

// AttachPartitioned attaches a loop device of size bytes whose MBR partition table holds one Linux
// partition spanning it from sector 2048, and returns the disk and the partition. Loop devices have no udev
// here, so partx adds the partition when the kernel's scan has not.
func AttachPartitioned(t testing.TB, dir string, size int64) (disk, part string) {
	t.Helper()
	mbr := make([]byte, 512)
	entry := mbr[446:462]
	entry[4] = 0x83 // Linux
	binary.LittleEndian.PutUint32(entry[8:], 2048)
	binary.LittleEndian.PutUint32(entry[12:], uint32(size/512-2048))
	mbr[510], mbr[511] = 0x55, 0xaa
	disk = attach(t, dir, size, mbr, "-P")
	part = disk + "p1"
	if _, err := os.Stat(part); err != nil {
		Run(t, "partx", "-a", disk)
	}
	if _, err := os.Stat(part); err != nil {
		t.Fatalf("partition of %s: %v", disk, err)
	}
	return disk, part
}
