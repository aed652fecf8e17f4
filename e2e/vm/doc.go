// Package vm is the real-kernel test lane: it boots Debian's kernel under qemu (software emulation, TCG;
// never KVM) with the host's whole userland mounted read-only over virtio-9p under a tmpfs overlay, so that
// device-mapper work the host kernel cannot do (LVs, thin pools, snapshots, mkfs and mount, shared VGs with
// sanlock and lvmlockd) runs against a real kernel.
//
// A test runs itself in a VM: on the host it calls Run (or RunMany for several VMs sharing disks), which
// re-executes the current test binary inside the guest with -test.run matching exactly this test; in the
// guest, InGuest reports true and the same function does the real work:
//
//	func TestVMThing(t *testing.T) {
//		if vm.InGuest() {
//			disks, err := vm.Disks() // "/dev/vda", ... in Options.Disks order
//			// ... pvcreate, lvcreate, mkfs, assertions ...
//			return
//		}
//		vm.Run(t, vm.Options{Disks: []vm.Disk{{Size: 2 << 30}}})
//	}
//
// Name VM tests TestVM... so that `make test-vm` selects them. Run skips only when qemu cannot run here, and
// under -short (make check's fast tier, before anything boots; a host side that builds or starts a control
// plane before Run calls Require first); every other problem (no kernel package, a VM that does not boot, a
// guest failure, a guest that did not run the test at all) fails the test; a guest test that skips skips the
// host test.
//
// The guest runs the whole test function again, so the InGuest branch must come before any Run call. For a
// subtest, the enclosing functions run in the guest too (they must reach the same t.Run). A test that boots
// several times (say, to see data survive a reboot on a Disk with a Path) tells the boots apart through
// Options.Env. Several VMs at once: RunMany, with Role telling each guest its part, and Signal/WaitSignal
// (files in SharedDir) ordering their steps; StartLockDaemons starts sanlock and lvmlockd for shared VGs.
//
// The machinery (the image, qemu, the guest's init, disks and network) is localvm's, which lvms local uses
// too; this package runs tests in it. The VM's options and the guest's view are localvm's (re-exported
// here: vm.Options, vm.Disks, vm.InGuest).
package vm
