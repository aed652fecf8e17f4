package blockdev

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// An idle agent need not start wipefs to learn, every resync, that its physical volumes are still physical
// volumes. The signatures of a device found to carry exactly an LVM physical volume label are remembered
// with the kernel's record of writes to it; as long as that record is unchanged, nothing was written
// through the block layer, so the signatures are unchanged too. Only LVM members are remembered: every
// other device, among them every candidate for pvcreate or a wipe, is probed afresh on each pass, so no
// decision that writes to a device rests on a remembered probe.

// sigEntry is a remembered probe: the device's write record when it was probed and what wipefs found.
type sigEntry struct {
	key  string
	sigs []string
}

// writeRecord identifies a device's content as of now without reading it: its disk sequence number (new
// for every medium the kernel attaches, including each loop device attachment), its size and its write
// and discard counters, with those of its disk for a partition (writes through the disk reach it too) and,
// for a loop device, its back file's size and modification time (writes to the file bypass the device).
// Empty when any part is unknown, when the kernel does not count I/O for the device, when writes are in
// flight, and for device types whose content can change beneath them (device-mapper, RAID).
func writeRecord(root string, dev *Device) string {
	if dev.Type != TypeDisk && dev.Type != TypePart && dev.Type != TypeLoop {
		return ""
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(root, "sys", "class", "block", filepath.Base(dev.KName)))
	if err != nil {
		return ""
	}
	disk := dir
	if dev.Type == TypePart {
		disk = filepath.Dir(dir)
	}
	parts := []string{dev.KName}
	for _, d := range uniq(dir, disk) {
		w := writeCounters(d)
		if w == "" {
			return ""
		}
		parts = append(parts, w)
	}
	for _, f := range []string{filepath.Join(disk, "diskseq"), filepath.Join(dir, "size")} {
		v := readTrimmed(f)
		if v == "" {
			return ""
		}
		parts = append(parts, v)
	}
	if readTrimmed(filepath.Join(disk, "queue", "iostats")) != "1" {
		return ""
	}
	if dev.Type == TypeLoop {
		if dev.BackingFile == "" {
			return ""
		}
		st, err := os.Stat(filepath.Join(root, dev.BackingFile))
		if err != nil {
			return ""
		}
		parts = append(parts, fmt.Sprintf("%d@%d", st.Size(), st.ModTime().UnixNano()))
	}
	return strings.Join(parts, "|")
}

// writeCounters are the write and discard fields of a block device's stat file (Documentation/block/
// stat.rst: write I/Os, merges, sectors; discard I/Os, merges, sectors), or "" with I/O in flight or an
// unreadable file.
func writeCounters(dir string) string {
	f := strings.Fields(readTrimmed(filepath.Join(dir, "stat")))
	if len(f) < 11 || f[8] != "0" {
		return ""
	}
	w := strings.Join(f[4:7], ",")
	if len(f) >= 15 {
		w += "," + strings.Join(f[11:14], ",")
	}
	return w
}

func readTrimmed(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func uniq(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// onlyLVM tells a probe worth remembering: exactly one LVM physical volume label.
func onlyLVM(sigs []string) bool { return len(sigs) == 1 && sigs[0] == SigLVM2 }
