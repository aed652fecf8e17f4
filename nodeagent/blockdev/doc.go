// Package blockdev discovers the block devices of a node in one pass without starting a process when
// nothing changed: /sys/class/block for the device tree (type, size, read-only, rotational, state,
// partitions, holders), udev's database for identifiers and partition metadata, the host's mount table and
// /proc/swaps for mount points — each read the way lsblk reads it, and lsblk itself where there is no /sys to
// read (recorded fixtures) — `wipefs --json` for the signatures on candidate devices (filesystems,
// partition tables, LVM labels; read from the disk, so never stale and never dependent on udev; an LVM
// member whose write counters did not move keeps its last probe), /sys for loop back-files, and
// /dev/disk/by-* for the stable links a selector may name. It understands loop devices, partitions,
// device-mapper devices (LVs, crypt, multipath) and md RAID through their types and the parent/child
// relations.
//
// Commands run through a Runner (nodeagent/lvm.Runner in the agent), so the same code works directly on a
// host and from a container through nsenter.
package blockdev
