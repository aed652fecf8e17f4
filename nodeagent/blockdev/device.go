package blockdev

import (
	"slices"
	"strings"
)

// lsblk device types the agent cares about.
const (
	TypeDisk  = "disk"
	TypePart  = "part"
	TypeLoop  = "loop"
	TypeLVM   = "lvm"
	TypeMpath = "mpath"
	TypeCrypt = "crypt"
	TypeDM    = "dm"
	TypeROM   = "rom"
)

// Signature types with a special meaning.
const (
	SigLVM2     = "LVM2_member"
	SigMpath    = "mpath_member"
	SigRAID     = "linux_raid_member"
	SigSwap     = "swap"
	SigPMBR     = "PMBR"
	SigGPT      = "gpt"
	SigDOSTable = "dos"
)

// Device is one block device with everything the filters need.
type Device struct {
	// KName is the kernel device path: /dev/sdb, /dev/dm-3, /dev/nvme0n1p2.
	KName string
	// Name is lsblk's name: the same as KName, or /dev/mapper/<name> for device-mapper devices.
	Name string
	// Path is lsblk's PATH (the device node path it prefers).
	Path string
	// Type is lsblk's type: disk, part, loop, lvm, mpath, crypt, raid1, rom, ...
	Type       string
	Size       uint64
	Rotational bool
	ReadOnly   bool
	// State is the device state lsblk reports (running, live, suspended, ...), empty when none.
	State     string
	Model     string
	Vendor    string
	Serial    string
	WWN       string
	PartLabel string
	// PartType is the partition type (a GPT type GUID or an MBR type such as 0xef).
	PartType string
	// PTType is the partition table on the device (gpt, dos), empty when none.
	PTType string
	// FSType is the first signature found (ext4, LVM2_member, swap, mpath_member, ...).
	FSType string
	// Signatures are all signatures wipefs found on the device, in the order it reports them, each once.
	Signatures []string
	// ProbeError says why the device could not be checked for signatures; it is empty when it was checked.
	ProbeError  string
	MountPoints []string
	MajMin      string
	// Parents are the KNames of the devices this one sits on (a partition's disk, the paths of a
	// multipath device, the members of an md array), sorted.
	Parents []string
	// Children are the KNames of the devices on top of this one (partitions, holders), sorted.
	Children []string
	// Links are the paths that lead to the device: /dev/disk/by-*/... links and /dev/mapper/<name>, sorted.
	Links []string
	// Busy is why an exclusive open of the device failed (EBUSY: a mount, a holder, or a program such as a
	// VM or mkfs has it open exclusively); empty when it succeeded or was not tried.
	Busy string
	// BackingFile of a loop device.
	BackingFile string
}

// Mounted reports whether the device is mounted or used as swap.
func (d *Device) Mounted() bool { return len(d.MountPoints) > 0 }

// Paths returns every path that names the device: kname, name, path and links, sorted and unique.
func (d *Device) Paths() []string {
	out := []string{d.KName}
	for _, p := range append([]string{d.Name, d.Path}, d.Links...) {
		if p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// HasPath reports whether p names the device.
func (d *Device) HasPath(p string) bool { return slices.Contains(d.Paths(), p) }

// HasSignature reports whether wipefs or lsblk found sig on the device.
func (d *Device) HasSignature(sig string) bool {
	return d.FSType == sig || slices.Contains(d.Signatures, sig)
}

// ForeignSignatures returns the signatures other than an LVM label, without duplicates and without the
// protective MBR that accompanies every GPT.
func (d *Device) ForeignSignatures() []string {
	var out []string
	add := func(s string) {
		if s != "" && s != SigLVM2 && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	add(d.FSType)
	if d.PTType != "" {
		add(d.PTType)
	}
	for _, s := range d.Signatures {
		if s == SigPMBR && (slices.Contains(d.Signatures, SigGPT) || d.PTType == SigGPT) {
			continue
		}
		add(s)
	}
	return out
}

// IsDeviceMapper reports whether the device is a device-mapper device.
func (d *Device) IsDeviceMapper() bool { return strings.HasPrefix(d.KName, "/dev/dm-") }
