package sandbox

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Prep says what a sandbox disk carries before LVMS sees it.
type Prep string

// Disk preparations.
const (
	// PrepNone leaves the disk empty (usable).
	PrepNone Prep = ""
	// PrepExt4 makes an ext4 file system on it (a foreign signature: excluded).
	PrepExt4 Prep = "ext4"
	// PrepPartitioned writes a DOS partition table with two partitions (excluded: it has, or would have,
	// partitions; a kernel without partition support shows only the table's signature).
	PrepPartitioned Prep = "partitioned"
)

// DiskSpec is one disk of a simulated node.
type DiskSpec struct {
	// Name is the disk's /dev/disk/by-id link name on its node (lvms-local-<name>).
	Name string
	Size int64
	Prep Prep
}

// Disk is an attached sandbox disk.
type Disk struct {
	DiskSpec
	// File is the sparse backing file; Device is its loop device (/dev/loopN).
	File   string
	Device string
}

// LinkName is the /dev/disk/by-id path under which a node sees a disk.
func LinkName(disk string) string { return "/dev/disk/by-id/lvms-local-" + disk }

// AttachDisk creates the sparse file (replacing an old one), attaches it as a loop device and prepares it.
func AttachDisk(ctx context.Context, file string, spec DiskSpec) (Disk, error) {
	d := Disk{DiskSpec: spec, File: file}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return d, fmt.Errorf("create disk directory: %w", err)
	}
	_ = os.Remove(file)
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
	if err != nil {
		return d, fmt.Errorf("create disk file %s: %w", file, err)
	}
	err = f.Truncate(spec.Size)
	if err == nil && spec.Prep == PrepPartitioned {
		err = WriteMBR(f, spec.Size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return d, fmt.Errorf("write disk file %s: %w", file, err)
	}
	out, err := exec.CommandContext(ctx, "losetup", "--find", "--show", "--partscan", file).CombinedOutput()
	if err != nil {
		return d, fmt.Errorf("attach %s as a loop device (losetup): %w: %s", file, err, strings.TrimSpace(string(out)))
	}
	d.Device = strings.TrimSpace(string(out))
	if spec.Prep == PrepExt4 {
		if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", d.Device).CombinedOutput(); err != nil {
			return d, fmt.Errorf("mkfs.ext4 %s: %w: %s", d.Device, err, strings.TrimSpace(string(out)))
		}
	}
	return d, nil
}

// WriteMBR writes a DOS partition table (a master boot record) to the first sector of f: two Linux
// partitions splitting a disk of size bytes. It is what `sfdisk` would write, without needing it.
func WriteMBR(f *os.File, size int64) error {
	sectors := uint32(size / 512)
	if sectors < 4096 {
		return fmt.Errorf("a disk of %d bytes is too small to partition", size)
	}
	const first = 2048
	half := (sectors - first) / 2
	mbr := make([]byte, 512)
	entry := func(off int, start, count uint32) {
		e := mbr[off : off+16]
		e[0] = 0x00                            // not bootable
		copy(e[1:4], []byte{0xfe, 0xff, 0xff}) // CHS start: use LBA
		e[4] = 0x83                            // Linux
		copy(e[5:8], []byte{0xfe, 0xff, 0xff}) // CHS end: use LBA
		binary.LittleEndian.PutUint32(e[8:12], start)
		binary.LittleEndian.PutUint32(e[12:16], count)
	}
	entry(446, first, half)
	entry(462, first+half, sectors-first-half)
	mbr[510], mbr[511] = 0x55, 0xaa
	if _, err := f.WriteAt(mbr, 0); err != nil {
		return fmt.Errorf("write partition table: %w", err)
	}
	return nil
}

// DetachDisk detaches a disk's loop device (every device backed by its file) and removes the file.
func DetachDisk(ctx context.Context, file string) error {
	devs, err := loopsBackedBy(ctx, file)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, dev := range devs {
		if out, err := exec.CommandContext(ctx, "losetup", "--detach", dev).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("detach %s: %w: %s", dev, err, strings.TrimSpace(string(out))))
		}
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove %s: %w", file, err))
	}
	return errors.Join(errs...)
}

// loopsBackedBy lists the loop devices whose back-file is file.
func loopsBackedBy(ctx context.Context, file string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "losetup", "--list", "--json", "--output", "NAME,BACK-FILE").Output()
	if err != nil {
		return nil, fmt.Errorf("list loop devices (losetup): %w", err)
	}
	return parseLoopList(out, func(back string) bool { return back == file })
}

// loopsUnder lists the loop devices whose back-file is in dir.
func loopsUnder(ctx context.Context, dir string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "losetup", "--list", "--json", "--output", "NAME,BACK-FILE").Output()
	if err != nil {
		return nil, fmt.Errorf("list loop devices (losetup): %w", err)
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	return parseLoopList(out, func(back string) bool { return strings.HasPrefix(back, prefix) })
}

// parseLoopList reads `losetup --list --json` output and returns the devices whose back-file matches.
// A back-file losetup marks "(deleted)" still counts.
func parseLoopList(data []byte, match func(string) bool) ([]string, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, nil // no loop devices at all
	}
	var doc struct {
		Loopdevices []struct {
			Name     string `json:"name"`
			BackFile string `json:"back-file"`
		} `json:"loopdevices"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse losetup output: %w", err)
	}
	var out []string
	for _, l := range doc.Loopdevices {
		if match(strings.TrimSuffix(l.BackFile, " (deleted)")) {
			out = append(out, l.Name)
		}
	}
	return out, nil
}
