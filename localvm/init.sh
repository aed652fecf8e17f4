#!/bin/busybox sh
# /init of the LVMS test VM (see image.go). Busybox is the only binary in the initramfs. It loads the kernel
# modules listed in /etc/lvms-vm/modules, mounts the host's / read-only over virtio-9p with a tmpfs overlay
# on top, mounts the per-run work share at /lvms-vm, sets up LVM for a guest without udev, switches root to
# run the script named by lvms.cmd= on the kernel command line, prints its exit code in a marker line and
# powers off. The loopback interface is always up; with lvms.ip=<address>/<len> and lvms.gw=<address> on the
# command line (a VM on qemu's user-mode network) eth0 gets that address and a default route. The host reads
# the markers from the serial console:
#   LVMS-VM-START            the guest command is about to start
#   LVMS-VM-EXIT <code>      the guest command exited with <code>
#   LVMS-VM-ERROR <message>  the VM could not be set up; the command did not run
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev
/bin/busybox --install -s
mount -t devtmpfs devtmpfs /dev
exec 0</dev/console 1>/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys

fail() {
	echo "LVMS-VM-ERROR $*"
	poweroff -f
	sleep 60
}

kver=$(uname -r)
while read -r mod; do
	[ -n "$mod" ] || continue
	insmod "/lib/modules/$kver/$mod" || fail "insmod $mod failed"
done </etc/lvms-vm/modules

cmd=
name=lvms-vm
ip=
gw=
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	lvms.cmd=*) cmd=${arg#lvms.cmd=} ;;
	lvms.name=*) name=${arg#lvms.name=} ;;
	lvms.ip=*) ip=${arg#lvms.ip=} ;;
	lvms.gw=*) gw=${arg#lvms.gw=} ;;
	esac
done
[ -n "$cmd" ] || fail "no lvms.cmd= on the kernel command line"
hostname "$name"
ip link set lo up || fail "bring up the loopback interface"
if [ -n "$ip" ]; then
	ip link set eth0 up || fail "bring up eth0 (lvms.ip=$ip): no network device?"
	ip addr add "$ip" dev eth0 || fail "address eth0 with $ip"
	[ -z "$gw" ] || ip route add default via "$gw" || fail "route through $gw"
fi

opts=trans=virtio,version=9p2000.L,msize=262144
mkdir -p /host /rw /newroot
mount -t 9p -o "$opts,ro,cache=loose" hostroot /host || fail "mount the host root over 9p (tag hostroot)"
mount -t tmpfs -o mode=0755 tmpfs /rw || fail "mount tmpfs for the overlay"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	fail "mount the overlay on the host root"
mount -t devtmpfs devtmpfs /newroot/dev || fail "mount devtmpfs"
mkdir -p /newroot/dev/pts /newroot/dev/shm /newroot/dev/disk/by-id
mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mount -t proc proc /newroot/proc || fail "mount proc"
mount -t sysfs sysfs /newroot/sys || fail "mount sysfs"
mount -t tmpfs -o mode=0755 tmpfs /newroot/run || fail "mount /run"
mkdir -p /newroot/run/lock /newroot/run/lvm /newroot/run/sanlock /newroot/run/lvms-host
# The host's root stays reachable under /run/lvms-host, so the guest script can bind a host directory that
# the fresh /tmp, /run or /dev/shm below hide (a checkout under /tmp, for example).
mount -o bind /host /newroot/run/lvms-host || fail "bind the host root at /run/lvms-host"
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp || fail "mount /tmp"
mkdir -p /newroot/lvms-vm
mount -t 9p -o "$opts" lvmsvm /newroot/lvms-vm || fail "mount the work share over 9p (tag lvmsvm)"
# A copy, not a bind mount: switch_root below empties the initramfs.
mkdir -p "/newroot/lib/modules/$kver"
mount -t tmpfs -o mode=0755 tmpfs "/newroot/lib/modules/$kver" || fail "mount tmpfs for the modules"
cp -a "/lib/modules/$kver/." "/newroot/lib/modules/$kver/" || fail "copy the modules into the guest"

# No udev: name disks by serial the way udev would (/dev/disk/by-id/virtio-<serial>).
for dev in /sys/block/vd*; do
	[ -r "$dev/serial" ] || continue
	serial=$(cat "$dev/serial")
	[ -n "$serial" ] && ln -sf "../../${dev##*/}" "/newroot/dev/disk/by-id/virtio-$serial"
done

# No udev: LVM must neither wait for udev nor rely on its rules or database, and there is no dmeventd.
mkdir -p /newroot/etc/lvm
cat >>/newroot/etc/lvm/lvmlocal.conf <<'EOF'

# Added by the LVMS test VM: there is no udev and no dmeventd in the guest.
activation {
	udev_sync = 0
	udev_rules = 0
	monitoring = 0
}
devices {
	obtain_device_list_from_udev = 0
}
EOF

export LVMS_IN_VM=1 DM_DISABLE_UDEV=1 HOME=/root TERM=dumb
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# switch_root, not chroot: the guest command's root must be the root of its mount namespace, so that
# `nsenter --target 1 --mount` (what the node agent does from a pod) lands in this file system rather than
# in the initramfs. The second stage is PID 1 from then on: it runs the command, reports, powers off.
cat >/newroot/run/lvms-vm-init <<'STAGE2'
echo "LVMS-VM-START"
/bin/sh "$1"
echo "LVMS-VM-EXIT $?"
sync
/bin/busybox poweroff -f
/bin/busybox sleep 60
STAGE2
exec switch_root /newroot /bin/busybox sh /run/lvms-vm-init "$cmd"
