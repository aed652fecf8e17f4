// This file holds what describes a VM: its options, their defaults and the environment its guest sees.

package localvm

import (
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Environment variables the guest command sees.
const (
	// EnvInVM is "1" inside a VM (set by init for every guest command).
	EnvInVM = "LVMS_IN_VM"
	// EnvRole is the VM's Options.Name: "vm" for Run, "a", "b", ... by default for RunMany.
	EnvRole = "LVMS_VM_ROLE"
	// EnvShared is the guest path of the directory shared read-write by all VMs of one Run or RunMany.
	EnvShared = "LVMS_VM_SHARED"
	// EnvDisks lists the serials of the VM's disks in Options order, separated by spaces.
	EnvDisks = "LVMS_VM_DISKS"
)

// Defaults for Options.
const (
	DefaultMemoryMiB = 2048
	// One vCPU: under software emulation on the 2-core machine a second vCPU per VM bought nothing on a
	// lone VM and oversubscribed the host when two VMs (or two packages' VMs) ran at once (measured with
	// lvm2 commands, sha256 and Go's TLS ciphers in a guest: docs/DESIGN.md, "The VM lane's cost").
	DefaultCPUs     = 1
	DefaultTimeout  = 10 * time.Minute
	DefaultDiskSize = 1 << 30
)

// Options describes one VM of Run or RunMany.
type Options struct {
	// Name labels the VM in the log and is its role (LVMS_VM_ROLE) and host name. Default "vm" for Run,
	// "a", "b", "c", ... (by position) for RunMany.
	Name string
	// Disks are attached in this order; Disks() in the guest returns their device paths in the same order.
	Disks []Disk
	// MemoryMiB defaults to DefaultMemoryMiB, CPUs to DefaultCPUs.
	MemoryMiB int
	CPUs      int
	// Timeout bounds the VM from start to power-off (default DefaultTimeout, never past the test's
	// deadline). When it expires qemu is killed and the test fails.
	Timeout time.Duration
	// Env is added to the guest command's environment. The guest also gets PATH, HOME=/root, LVMS_IN_VM=1,
	// DM_DISABLE_UDEV=1, the LVMS_VM_* variables, and the host's KUBEBUILDER_ASSETS and LVMS_CACHE if set;
	// nothing else from the host.
	Env map[string]string
	// Network, when set, gives the VM a NIC on a restricted user-mode network (see Network).
	Network *Network
}

// Disk is a raw disk of a VM.
type Disk struct {
	// Size in bytes of a new disk file (sparse); default DefaultDiskSize. An existing Path keeps its size.
	Size int64
	// Serial is the device serial (at most 20 characters of [A-Za-z0-9_.-]). Default "lvms-disk<N>" for a
	// private disk and "lvms-<hash of Path>" for a Path disk, so a shared disk has the same serial, and the
	// same /dev/disk/by-id/virtio-<serial> link, in every VM.
	Serial string
	// Path is a host file to use instead of a private temporary one; it is created when missing and not
	// removed afterwards (put it in t.TempDir()). The same Path in several VMs of one RunMany is a shared
	// LUN; the same Path in consecutive Runs keeps its data.
	Path string
}

// hostRole is the role the host side signals and waits as.
const hostRole = "host"

// Unavailable returns why qemu cannot run on this machine, or "" when it can.
func Unavailable() string {
	path, err := exec.LookPath(QemuBinary)
	if err != nil {
		return fmt.Sprintf("%s is not installed (Debian package qemu-system-x86)", QemuBinary)
	}
	out, err := exec.Command(path, "-version").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s cannot run here (%v: %s)", path, err, strings.TrimSpace(string(out)))
	}
	return ""
}
