package blockdev

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Runner runs a host command and returns its stdout; a non-zero exit is an error that exposes
// ExitCode() int (nodeagent/lvm.Runner is one).
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Discoverer reads the node's block devices.
type Discoverer struct {
	Runner Runner
	// Root is the file system root under which /dev/disk/by-* and /sys are read (default "/"). Tests
	// point it at a directory of recorded files.
	Root string
	// Lsblk lists devices with lsblk even where /sys can be read: recorded sessions that replay lsblk's
	// output on another machine.
	Lsblk bool

	legacy atomic.Bool // lsblk is older than util-linux 2.37 (no MOUNTPOINTS)

	mu     sync.Mutex
	lvmSig map[string]sigEntry // remembered probes of LVM members by KName (sigcache.go)
}

func (d *Discoverer) root() string {
	if d.Root == "" {
		return "/"
	}
	return d.Root
}

// Inventory is the result of one discovery pass.
type Inventory struct {
	// Devices sorted by KName.
	Devices []Device
	root    string
	index   map[string]int // every path of every device -> index in Devices
	majMin  map[string]int
}

// NewInventory indexes devices (sorted by KName) found under root.
func NewInventory(devices []Device, root string) *Inventory {
	slices.SortFunc(devices, func(a, b Device) int { return strings.Compare(a.KName, b.KName) })
	inv := &Inventory{Devices: devices, root: root, index: map[string]int{}, majMin: map[string]int{}}
	for i := range devices {
		for _, p := range devices[i].Paths() {
			if _, taken := inv.index[p]; !taken {
				inv.index[p] = i
			}
		}
		if devices[i].MajMin != "" {
			inv.majMin[devices[i].MajMin] = i
		}
	}
	return inv
}

// Get returns the device with the given KName.
func (inv *Inventory) Get(kname string) (*Device, bool) {
	i, ok := slices.BinarySearchFunc(inv.Devices, kname, func(d Device, k string) int { return strings.Compare(d.KName, k) })
	if !ok {
		return nil, false
	}
	return &inv.Devices[i], true
}

// Lookup returns the device one of whose known paths is p.
func (inv *Inventory) Lookup(p string) (*Device, bool) {
	i, ok := inv.index[filepath.Clean(p)]
	if !ok {
		return nil, false
	}
	return &inv.Devices[i], true
}

// Resolve finds the device a path names: a known path (kname, /dev/mapper name, /dev/disk/by-* link),
// else the target of the symlink, else the device node with the same major:minor.
func (inv *Inventory) Resolve(p string) (*Device, bool) {
	if d, ok := inv.Lookup(p); ok {
		return d, true
	}
	if !strings.HasPrefix(p, "/dev/") {
		return nil, false
	}
	full := filepath.Join(inv.root, p)
	if target, err := filepath.EvalSymlinks(full); err == nil {
		rel, err := filepath.Rel(inv.root, target)
		if err == nil && !strings.HasPrefix(rel, "..") {
			if d, ok := inv.Lookup("/" + rel); ok {
				return d, true
			}
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(full, &st); err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFBLK {
		key := majMin(uint64(st.Rdev))
		if i, ok := inv.majMin[key]; ok {
			return &inv.Devices[i], true
		}
	}
	return nil, false
}

// Discover lists the devices (from /sys, or with lsblk where root has no /sys/class/block: recorded
// fixtures), reads links and loop back-files, and probes candidate devices for signatures.
func (d *Discoverer) Discover(ctx context.Context) (*Inventory, error) {
	var devices []Device
	var err error
	if st, serr := os.Stat(filepath.Join(d.root(), "sys", "class", "block")); serr == nil && st.IsDir() && !d.Lsblk {
		devices, err = ReadSysfs(d.root())
	} else {
		devices, err = d.lsblk(ctx)
	}
	if err != nil {
		return nil, err
	}
	links, err := ReadLinks(d.root())
	if err != nil {
		return nil, err
	}
	for i := range devices {
		dev := &devices[i]
		dev.Links = append(dev.Links, links[dev.KName]...)
		if dev.Name != dev.KName && dev.Name != "" {
			dev.Links = append(dev.Links, dev.Name)
		}
		slices.Sort(dev.Links)
		dev.Links = slices.Compact(dev.Links)
		if dev.Type == TypeLoop {
			dev.BackingFile = ReadBackingFile(d.root(), dev.KName)
		}
	}
	d.probeSignatures(ctx, devices)
	d.probePartitions(ctx, devices)
	d.probeExclusive(devices)
	return NewInventory(devices, d.root()), nil
}

// probeExclusive opens each device that could become a physical volume with O_EXCL, as mkfs and the kernel's
// own claims do: it fails with EBUSY while anyone else holds the device, even a program lsblk and wipefs
// cannot see (a VM's raw disk, a database, a running mkfs). LVM volumes and devices with children or mounts
// are left alone: they are excluded anyway, and in use by design.
func (d *Discoverer) probeExclusive(devices []Device) {
	for i := range devices {
		dev := &devices[i]
		if dev.Type == TypeLVM || len(dev.Children) > 0 || dev.Mounted() || dev.HasSignature(SigLVM2) {
			// An LVM member is LVM's to use: ours is ours, a foreign one is excluded by its label. Holding it
			// exclusively, even for an instant, makes device-mapper fail to activate an LV on it (a table load
			// claims its devices), and passes now run right when LVs are activated (kernel device events).
			continue
		}
		f, err := os.OpenFile(filepath.Join(d.root(), dev.KName), os.O_RDONLY|syscall.O_EXCL|syscall.O_CLOEXEC, 0)
		if err == nil {
			_ = f.Close()
			continue
		}
		if errors.Is(err, syscall.EBUSY) {
			dev.Busy = err.Error()
		}
	}
}

func (d *Discoverer) lsblk(ctx context.Context) ([]Device, error) {
	cols := Columns
	if d.legacy.Load() {
		cols = LegacyColumns
	}
	out, err := d.Runner.Run(ctx, "lsblk", LsblkArgs(cols)...)
	if err != nil && !d.legacy.Load() && strings.Contains(strings.ToLower(err.Error()), "unknown column") {
		d.legacy.Store(true)
		out, err = d.Runner.Run(ctx, "lsblk", LsblkArgs(LegacyColumns)...)
	}
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	devices, err := ParseLsblk(out)
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	return devices, nil
}

// probeable says whether a device is worth probing: something that could become a PV. Mounted devices,
// devices with holders or partitions, LVs and empty devices are excluded by the filters anyway, and wipefs
// cannot open mounted or held devices.
func probeable(d *Device) bool {
	return d.Size > 0 && !d.Mounted() && len(d.Children) == 0 && d.Type != TypeLVM && d.Type != TypeROM
}

// probeSignatures reads signatures with one wipefs for all candidate devices; if that fails (one device
// could not be opened), each device is probed alone and a failure is recorded on the device. An LVM member
// whose write record is unchanged since its last probe keeps that probe's signatures (sigcache.go).
func (d *Discoverer) probeSignatures(ctx context.Context, devices []Device) {
	d.mu.Lock()
	defer d.mu.Unlock()
	remembered := d.lvmSig
	d.lvmSig = map[string]sigEntry{} // devices gone since the last pass are forgotten
	var names []string
	keys := map[string]string{}
	for i := range devices {
		dev := &devices[i]
		if !probeable(dev) {
			continue
		}
		key := writeRecord(d.root(), dev)
		if e, ok := remembered[dev.KName]; ok && key != "" && e.key == key {
			applySignatures(dev, e.sigs)
			d.lvmSig[dev.KName] = e
			continue
		}
		keys[dev.KName] = key
		names = append(names, dev.KName)
	}
	if len(names) == 0 {
		return
	}
	defer func() {
		for _, n := range names {
			dev := findDevice(devices, n)
			if keys[n] != "" && dev.ProbeError == "" && onlyLVM(dev.Signatures) {
				d.lvmSig[n] = sigEntry{key: keys[n], sigs: dev.Signatures}
			}
		}
	}()
	sigs, err := d.wipefs(ctx, names)
	if err != nil {
		sigs = map[string][]string{}
		for _, n := range names {
			one, err := d.wipefs(ctx, []string{n})
			if err != nil {
				dev := findDevice(devices, n)
				dev.ProbeError = err.Error()
				continue
			}
			sigs[n] = one[n]
		}
	}
	for _, n := range names {
		dev := findDevice(devices, n)
		if dev.ProbeError != "" {
			continue
		}
		applySignatures(dev, sigs[n])
	}
}

// applySignatures makes the on-disk signatures the truth for FSType and PTType (udev's copy in lsblk may
// be stale, for example right after a wipe). mpath_member is kept: it is udev's knowledge, not a signature.
func applySignatures(dev *Device, sigs []string) {
	dev.Signatures = sigs
	fs, pt := "", ""
	for _, s := range sigs {
		switch s {
		case SigGPT, SigDOSTable:
			if pt == "" {
				pt = s
			}
		case SigPMBR:
		default:
			if fs == "" {
				fs = s
			}
		}
	}
	if dev.FSType != SigMpath {
		dev.FSType = fs
	}
	dev.PTType = pt
}

func findDevice(devices []Device, kname string) *Device {
	for i := range devices {
		if devices[i].KName == kname {
			return &devices[i]
		}
	}
	return nil
}

func (d *Discoverer) wipefs(ctx context.Context, names []string) (map[string][]string, error) {
	out, err := d.Runner.Run(ctx, "wipefs", WipefsArgs(names)...)
	if err != nil {
		return nil, fmt.Errorf("read signatures: %w", err)
	}
	return ParseWipefs(out)
}

// probePartitions fills partition labels and types that lsblk could not report (no udev database on the
// host) with blkid's low-level probe, which reads the partition table.
func (d *Discoverer) probePartitions(ctx context.Context, devices []Device) {
	var parts []string
	for i := range devices {
		if devices[i].Type == TypePart && devices[i].PartLabel == "" && devices[i].PartType == "" {
			parts = append(parts, devices[i].KName)
		}
	}
	// blkid -p stops at the first device it cannot identify, so devices missing from one run are retried.
	for len(parts) > 0 {
		out, _ := d.Runner.Run(ctx, "blkid", append([]string{"-p", "-o", "export"}, parts...)...)
		found := ParseBlkidExport(out)
		var rest []string
		for i, p := range parts {
			info, ok := found[p]
			if !ok {
				if i == 0 {
					// blkid could not read the first one: skip it rather than loop.
					rest = append(rest[:0], parts[1:]...)
					break
				}
				rest = append(rest, p)
				continue
			}
			dev := findDevice(devices, p)
			dev.PartLabel, dev.PartType = info["PART_ENTRY_NAME"], info["PART_ENTRY_TYPE"]
		}
		if len(rest) == len(parts) {
			break
		}
		parts = rest
	}
}

// ReadLinks maps device kernel paths to the /dev/disk/by-* symlinks that point at them.
func ReadLinks(root string) (map[string][]string, error) {
	out := map[string][]string{}
	base := filepath.Join(root, "dev", "disk")
	dirs, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read device links: %w", err)
	}
	for _, dir := range dirs {
		if !dir.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(base, dir.Name()))
		if err != nil {
			continue
		}
		for _, e := range entries {
			link := filepath.Join(base, dir.Name(), e.Name())
			target, err := os.Readlink(link)
			if err != nil {
				continue
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(link), target)
			}
			rel, err := filepath.Rel(root, filepath.Clean(target))
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			kname := "/" + rel
			out[kname] = append(out[kname], filepath.Join("/dev", "disk", dir.Name(), e.Name()))
		}
	}
	return out, nil
}

// ReadBackingFile returns the back-file of a loop device from /sys, or "".
func ReadBackingFile(root, kname string) string {
	data, err := os.ReadFile(filepath.Join(root, "sys", "block", filepath.Base(kname), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// majMin formats a Linux device number as lsblk's MAJ:MIN.
func majMin(rdev uint64) string {
	major := (rdev>>8)&0xfff | (rdev>>32)&^uint64(0xfff)
	minor := rdev&0xff | (rdev>>12)&^uint64(0xff)
	return fmt.Sprintf("%d:%d", major, minor)
}
