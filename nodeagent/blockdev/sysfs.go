package blockdev

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The kernel already says everything lsblk prints: the device tree is in /sys/class/block (partitions,
// holders and slaves), sizes and flags in each device's attributes, device-mapper names and owners in dm/,
// identifiers and partition metadata in udev's database under /run/udev/data, and mounts in the host's
// mount table. Reading them directly spares an idle agent one process per resync. The rules follow lsblk
// (util-linux) column by column, so that a device selector or filter that matched before still matches;
// TestReadSysfs_MatchesLsblk compares both on the live host.

// Major numbers lsblk treats specially: RAM disks are excluded by default, loop devices without a back-file
// are not listed.
const (
	ramMajor  = 1
	loopMajor = 7
)

// sysDevice is one entry of /sys/class/block with the paths its attributes are read from.
type sysDevice struct {
	name string // sysfs name: sda, sda1, dm-3, nvme0n1p2, cciss!c0d0
	dir  string // its resolved sysfs directory
	disk string // the whole disk's directory for a partition, else dir
	part bool
	// slaves are the devices a device-mapper or md device sits on, read once.
	slaves []string
}

func (s sysDevice) read(attr string) string { return readTrimmed(filepath.Join(s.dir, attr)) }

// queue attributes exist on whole disks only; lsblk reads a partition's from its disk.
func (s sysDevice) queue(attr string) string {
	return readTrimmed(filepath.Join(s.disk, "queue", attr))
}

func (s sysDevice) entries(sub string) []string {
	es, err := os.ReadDir(filepath.Join(s.dir, sub))
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// devPath is the /dev path of a sysfs name: a "!" in sysfs stands for a "/" in /dev.
func devPath(name string) string { return "/dev/" + strings.ReplaceAll(name, "!", "/") }

// ReadSysfs lists the block devices under root the way `lsblk --json --bytes --paths -o Columns` would,
// from /sys, /run/udev/data and the mount table of the host (PID 1's, which is the host's in the agent's
// pod and on the host itself). It fails only when /sys/class/block cannot be read.
func ReadSysfs(root string) ([]Device, error) {
	base := filepath.Join(root, "sys", "class", "block")
	es, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	sys := map[string]sysDevice{}
	for _, e := range es {
		dir, err := filepath.EvalSymlinks(filepath.Join(base, e.Name()))
		if err != nil {
			continue // gone while listing
		}
		s := sysDevice{name: e.Name(), dir: dir, disk: dir}
		if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
			s.part, s.disk = true, filepath.Dir(dir)
		}
		s.slaves = s.entries("slaves")
		sys[s.name] = s
	}
	mounts := readMounts(root)
	byName := map[string]*Device{}
	for _, s := range sys {
		if d := s.device(root, mounts); d != nil {
			byName[s.name] = d
		}
	}
	// The tree: a partition sits on its disk, a holder (device-mapper, md) on each of its slaves.
	for name, d := range byName {
		var parents []string
		if s := sys[name]; s.part {
			parents = append(parents, filepath.Base(s.disk))
		}
		parents = append(parents, sys[name].slaves...)
		for _, p := range parents {
			pd, ok := byName[p]
			if !ok {
				continue
			}
			if !slices.Contains(d.Parents, pd.KName) {
				d.Parents = append(d.Parents, pd.KName)
			}
			if !slices.Contains(pd.Children, d.KName) {
				pd.Children = append(pd.Children, d.KName)
			}
		}
	}
	out := make([]Device, 0, len(byName))
	for _, d := range byName {
		slices.Sort(d.Parents)
		slices.Sort(d.Children)
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b Device) int { return strings.Compare(a.KName, b.KName) })
	return out, nil
}

// device reads one device, or nil for what lsblk leaves out by default: hidden devices (an NVMe namespace
// behind native multipath), RAM disks and loop devices with nothing attached.
func (s sysDevice) device(root string, mounts map[string][]string) *Device {
	if s.read("hidden") == "1" {
		return nil
	}
	majMin := s.read("dev")
	major, _, ok := strings.Cut(majMin, ":")
	if !ok {
		return nil
	}
	sectors, _ := strconv.ParseUint(s.read("size"), 10, 64)
	size := sectors << 9
	if major == strconv.Itoa(ramMajor) {
		return nil
	}
	if size == 0 && major == strconv.Itoa(loopMajor) && s.read("loop/backing_file") == "" {
		return nil
	}
	kname := devPath(s.name)
	d := &Device{KName: kname, Name: kname, Path: kname, Size: size, MajMin: majMin,
		ReadOnly: s.read("ro") == "1", Rotational: s.queue("rotational") == "1"}
	dmName := ""
	if strings.HasPrefix(s.name, "dm-") {
		dmName = s.read("dm/name")
		if dmName == "" {
			return nil // lsblk skips a device-mapper device it cannot name
		}
		d.Name, d.Path = "/dev/mapper/"+dmName, "/dev/mapper/"+dmName
	}
	d.Type = s.devType(dmName != "")
	udev := readUdev(root, majMin)
	// Identity belongs to the whole device, not to a partition or a device stacked on others.
	if !s.part && len(s.slaves) == 0 {
		d.Model = firstNonEmpty(udev["ID_MODEL"], s.read("device/model"))
		d.Serial = firstNonEmpty(udev["ID_SCSI_SERIAL"], udev["ID_SERIAL_SHORT"], s.read("device/serial"))
		d.Vendor = s.read("device/vendor")
	}
	d.WWN = firstNonEmpty(udev["ID_WWN_WITH_EXTENSION"], udev["ID_WWN"])
	d.FSType = udev["ID_FS_TYPE"]
	d.PTType = udev["ID_PART_TABLE_TYPE"]
	d.PartLabel = unhexmangle(udev["ID_PART_ENTRY_NAME"])
	d.PartType = udev["ID_PART_ENTRY_TYPE"]
	switch {
	case dmName != "":
		switch s.read("dm/suspended") {
		case "1":
			d.State = "suspended"
		case "0":
			d.State = "running"
		}
	case !s.part:
		d.State = s.read("device/state")
	}
	d.MountPoints = slices.Clone(mounts[majMin])
	return d
}

// devType is lsblk's TYPE: part; for device-mapper the owner named by the dm UUID's prefix (LVM, CRYPT,
// mpath, part for kpartx maps) or dm; loop; the RAID level of an md array; else the SCSI peripheral type
// (disk when the device has none).
func (s sysDevice) devType(dm bool) string {
	var t string
	switch {
	case s.part:
		t = TypePart
	case dm:
		t = TypeDM
		if prefix, _, ok := strings.Cut(s.read("dm/uuid"), "-"); ok && prefix != "" {
			t = prefix
			if len(t) > 4 && strings.EqualFold(t[:4], "part") {
				t = t[:4] // kpartx numbers its maps part1-, part2-, ...
			}
		}
	case strings.HasPrefix(s.name, "loop"):
		t = TypeLoop
	case strings.HasPrefix(s.name, "md"):
		t = firstNonEmpty(s.read("md/level"), "md")
	default:
		t = TypeDisk
		if n, err := strconv.Atoi(s.read("device/type")); err == nil {
			if name, ok := scsiTypes[n]; ok {
				t = name
			}
		}
	}
	return strings.ToLower(t)
}

// scsiTypes are the SCSI peripheral device types lsblk names (SPC-4).
var scsiTypes = map[int]string{0x00: "disk", 0x01: "tape", 0x02: "printer", 0x03: "processor", 0x04: "worm",
	0x05: "rom", 0x06: "scanner", 0x07: "mo-disk", 0x08: "changer", 0x09: "comm", 0x0c: "raid", 0x0d: "enclosure",
	0x0e: "rbc", 0x11: "osd", 0x7f: "no-lun"}

// readUdev returns the properties (E: lines) udev recorded for a block device, or nil without a database
// (a host without udev; lsblk then reports no identifiers either).
func readUdev(root, majMin string) map[string]string {
	data, err := os.ReadFile(filepath.Join(root, "run", "udev", "data", "b"+majMin))
	if err != nil {
		return nil
	}
	props := map[string]string{}
	for line := range bytes.Lines(data) {
		if kv, ok := bytes.CutPrefix(bytes.TrimRight(line, "\n"), []byte("E:")); ok {
			if k, v, ok := bytes.Cut(kv, []byte("=")); ok {
				props[string(k)] = strings.TrimSpace(string(v))
			}
		}
	}
	return props
}

// unhexmangle decodes udev's \xNN escapes (ID_PART_ENTRY_NAME carries a label with spaces as \x20).
func unhexmangle(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if n, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readMounts maps major:minor to mount points, from the host's mount table, and "[SWAP]" for swap
// partitions, as lsblk's MOUNTPOINTS shows them.
func readMounts(root string) map[string][]string {
	out := map[string][]string{}
	data, err := os.ReadFile(filepath.Join(root, "proc", "1", "mountinfo"))
	if err != nil {
		data, _ = os.ReadFile(filepath.Join(root, "proc", "self", "mountinfo"))
	}
	add := func(majMin, target string) {
		if majMin != "" && !slices.Contains(out[majMin], target) {
			out[majMin] = append(out[majMin], target)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw (proc_pid_mountinfo(5))
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if len(f) < 5 || sep < 6 || sep+2 >= len(f) {
			continue
		}
		majMin, target, source := f[2], unescapeMount(f[4]), f[sep+2]
		if strings.HasPrefix(majMin, "0:") && strings.HasPrefix(source, "/dev/") {
			// A file system with an anonymous device number (btrfs): its source names the device.
			majMin = deviceNumber(root, source)
		}
		add(majMin, target)
	}
	swaps, _ := os.ReadFile(filepath.Join(root, "proc", "swaps"))
	for i, line := range strings.Split(string(swaps), "\n") {
		if f := strings.Fields(line); i > 0 && len(f) >= 2 && f[1] == "partition" {
			add(deviceNumber(root, unescapeMount(f[0])), "[SWAP]")
		}
	}
	return out
}

// deviceNumber is the major:minor of the block device at path, or "".
func deviceNumber(root, path string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, path), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFBLK {
		return ""
	}
	return majMin(uint64(st.Rdev))
}

// unescapeMount decodes the octal escapes the kernel writes for space, tab, newline and backslash.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
