// Package localvm boots Debian's kernel under qemu (software emulation, TCG; never KVM) with the host's
// whole userland mounted read-only over virtio-9p under a tmpfs overlay, and runs one host program in each
// guest. `lvms local` boots its node VMs with it (kubelet and containerd on a real kernel, with
// device-mapper the host may lack); the test lane (e2e/vm) runs test binaries in it.
//
// Boot starts the VMs; each guest runs Binary with Args in Dir, sees its role (Role), its disks in Options
// order (Disks) and a directory shared with the other VMs and the host (SharedDir), through which they
// order their steps (SignalStep, WaitStep; Machines.Signal and WaitSignal on the host). A VM ends when its
// program exits, its timeout passes or Boot's context ends.
//
// The guest: kernel modules for virtio, 9p, overlay, device-mapper (thin, snapshot; raid, mirror, cache,
// integrity, crypt on demand via modprobe), xfs, ext4 and loop. No network device unless Options.Network
// gives one (qemu's restricted user-mode network: the guest reaches only the host ports forwarded to it),
// but the loopback interface is up. No udev, so init configures LVM in /etc/lvm/lvmlocal.conf
// (activation/udev_sync=0, udev_rules=0, monitoring=0; devices/obtain_device_list_from_udev=0), exports
// DM_DISABLE_UDEV=1 and links /dev/disk/by-id/virtio-<serial>. Fresh tmpfs on /tmp, /run and /dev/shm;
// the host's / read-only under a tmpfs overlay (writes stay in the VM), and at HostRootInGuest as it is.
// The run's work directory is mounted read-write at GuestWorkDir (the program, scripts, and SharedDir).
//
// The kernel (apt-get download of the package linux-image-amd64 depends on) and the initramfs are built
// once and cached under ${LVMS_CACHE:-$HOME/.cache/lvms}/vm/<kernel-version>/; see Prepare.
package localvm
