#!/usr/bin/env bash
# Records the host-loops fixtures: real util-linux (lsblk, blkid) and lvm2 output for loop devices that show
# every case the filters handle on a host without device-mapper or udev. Run as root on a host with no other
# loop devices in use: nodeagent/blockdev/testdata/record-host-loops.sh <scratch dir>. It cleans up after
# itself.
set -euo pipefail
work=${1:?scratch directory}
out=$(cd "$(dirname "$0")" && pwd)/host-loops
mkdir -p "$work" "$out"
export LVM_SUPPRESS_FD_WARNINGS=1 LC_ALL=C
cd "$work"
loops=()
attach() { REPLY=$(losetup -f --show "$@"); loops+=("$REPLY"); }
cleanup() {
	umount "$work/mnt" 2>/dev/null || true
	swapoff "${swapdev:-/nonexistent}" 2>/dev/null || true
	lvm vgremove -y --devicesfile rec-a.devices rec-vg1 >/dev/null 2>&1 || true
	lvm vgremove -y --devicesfile rec-b.devices rec-foreign >/dev/null 2>&1 || true
	for l in "${loops[@]}"; do lvm pvremove -y --devicesfile rec-a.devices "$l" >/dev/null 2>&1 || true; done
	for l in "${loops[@]}"; do blockdev --setrw "$l" || true; losetup -d "$l" || true; done # --setro outlives the loop
	rm -f /etc/lvm/devices/rec-a.devices /etc/lvm/devices/rec-b.devices
}
trap cleanup EXIT

truncate -s 512M a.img; attach -P a.img; a=$REPLY
printf 'label: gpt\nsize=2MiB, type=21686148-6449-6E6F-744E-656564454649, name="BIOS-BOOT"\nsize=100MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI-SYSTEM"\nsize=150MiB, name="data1"\nname="data2"\n' | sfdisk -q "$a"
partx -a "$a" 2>/dev/null || true
mkfs.vfat "${a}p2" >/dev/null
mkfs.ext4 -q "${a}p3"
mkdir -p mnt && mount "${a}p3" mnt
truncate -s 300M b.img; attach b.img; b=$REPLY                      # empty: a candidate
truncate -s 300M c.img; attach c.img; c=$REPLY                      # PV of our VG
lvm vgcreate -q --devicesfile rec-a.devices --addtag lvms rec-vg1 "$c" >/dev/null
truncate -s 300M d.img; attach d.img; d=$REPLY                      # PV of another agent's VG
lvm vgcreate -q --devicesfile rec-b.devices rec-foreign "$d" >/dev/null
truncate -s 300M e.img; attach -r e.img; e=$REPLY                   # read-only loop
truncate -s 300M f.img; attach f.img; f=$REPLY; blockdev --setro "$f" # read-only by blockdev
truncate -s 64M g.img; attach g.img; g=$REPLY                       # too small
mkdir -p kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-0b1c
truncate -s 300M kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-0b1c/dev
attach kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-0b1c/dev; h=$REPLY # a kubelet block volume
truncate -s 300M i.img; attach i.img; i=$REPLY; mkswap -q "$i"; swapdev=$i; swapon "$i" 2>/dev/null || true
truncate -s 300M j.img; attach j.img; j=$REPLY; mkfs.ext4 -q "$j"   # whole-disk filesystem, not mounted
truncate -s 300M k.img; attach k.img; k=$REPLY                      # orphan PV (interrupted before vgcreate)
lvm pvcreate -q --devicesfile rec-a.devices "$k" >/dev/null

mkdir -p "$out/root/dev/disk/by-id" "$out/root/dev/disk/by-partlabel"
for l in "${loops[@]}"; do
	n=${l#/dev/}
	mkdir -p "$out/root/sys/block/$n/loop"
	sed "s#^$work#/var/lib/lvms-test#" "/sys/block/$n/loop/backing_file" >"$out/root/sys/block/$n/loop/backing_file"
done
# Stable links as udev would make them (this host has no udev).
ln -sfn ../../${b#/dev/} "$out/root/dev/disk/by-id/virtio-lvms-empty"
ln -sfn ../../${c#/dev/} "$out/root/dev/disk/by-id/virtio-lvms-ours"
ln -sfn ../../${a#/dev/}p4 "$out/root/dev/disk/by-partlabel/data2"
{
	echo "a=$a (GPT: BIOS boot, EFI vfat, ext4 mounted, empty partition)"
	echo "b=$b (empty)"; echo "c=$c (PV of rec-vg1, tagged lvms, devices file rec-a.devices)"
	echo "d=$d (PV of rec-foreign, devices file rec-b.devices)"; echo "e=$e (losetup -r)"; echo "f=$f (blockdev --setro)"
	echo "g=$g (64 MiB)"; echo "h=$h (backing file under kubelet plugins)"; echo "i=$i (swap)"
	echo "j=$j (ext4, not mounted)"; echo "k=$k (orphan PV in rec-a.devices)"
	echo "recorded with: $(lsblk --version), $(lvm version | head -1 | xargs), kernel $(uname -r)"
} >"$out/README"
# The discovery and the LVM report are recorded by the agent's own code, exactly as it runs them.
cd "$(dirname "$out")/../../.."
LVMS_RECORD_HOST_LOOPS="$out/session.json" LVMS_RECORD_DEVICES_FILE=rec-a.devices \
	go test ./nodeagent/blockdev -run '^TestRecordHostLoops$' -count=1
