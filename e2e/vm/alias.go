// This file re-exports the machinery of localvm that tests use, so that a VM test reads vm.Options,
// vm.Disks() and vm.InGuest() as before the machinery became the product's (lvms local boots its nodes
// with it).

package vm

import (
	"testing"

	"github.com/lvms-dev/lvms/localvm"
)

type (
	Options  = localvm.Options
	Disk     = localvm.Disk
	Network  = localvm.Network
	Forward  = localvm.Forward
	Machines = localvm.Machines
)

const (
	EnvInVM          = localvm.EnvInVM
	EnvRole          = localvm.EnvRole
	EnvShared        = localvm.EnvShared
	EnvDisks         = localvm.EnvDisks
	DefaultMemoryMiB = localvm.DefaultMemoryMiB
	DefaultCPUs      = localvm.DefaultCPUs
	DefaultTimeout   = localvm.DefaultTimeout
	DefaultDiskSize  = localvm.DefaultDiskSize
	GuestWorkDir     = localvm.GuestWorkDir
	HostRootInGuest  = localvm.HostRootInGuest
)

// InGuest reports whether the code runs inside a VM of the lane.
func InGuest() bool { return localvm.InGuest() }

// Role is the VM's Options.Name, or "" on the host.
func Role() string { return localvm.Role() }

// SharedDir is the directory all VMs of one Run or RunMany share read-write, or "" on the host.
func SharedDir() string { return localvm.SharedDir() }

// Disks returns the device paths of the VM's disks in Options.Disks order.
func Disks() ([]string, error) { return localvm.Disks() }

// Signalled reports whether some VM (or the host) has signalled name, without waiting.
func Signalled(name string) bool { return localvm.Signalled(name) }

// FreeHostAddr is a host loopback address with a port nothing listens on now, for a FromHost forward.
func FreeHostAddr(t testing.TB) string {
	t.Helper()
	addr, err := localvm.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
