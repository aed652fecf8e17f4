// Package blockdev discovers the block devices of a node in one pass: `lsblk --json` for the device tree
// (type, size, read-only, rotational, state, identifiers, partitions, holders, mount points), `wipefs
// --json` for the signatures on candidate devices (filesystems, partition tables, LVM labels; read from the
// disk, so never stale and never dependent on udev), /sys for loop back-files, and /dev/disk/by-* for the
// stable links a selector may name. It understands loop devices, partitions, device-mapper devices
// (LVs, crypt, multipath) and md RAID through lsblk's types and the parent/child relations.
//
// Commands run through a Runner (nodeagent/lvm.Runner in the agent), so the same code works directly on a
// host and from a container through nsenter.
package blockdev
