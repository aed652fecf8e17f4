// Package filter decides, for every desired volume group of a node, which devices it includes and why every
// other candidate is excluded. It is the only place in LVMS that makes this decision; the status and the
// console show its output.
//
// For each volume group (in spec order) and each device (by kernel name) the selector speaks first: a
// device it does not pick is not a candidate, except a near miss (some expression matched), which is
// reported NotSelected with the failed expression. Paths the selector names that do not exist are reported
// NotFound. Every picked device then runs through the filters below, in this order, and collects one
// reason (a machine-readable code and a sentence) from each filter that rejects it:
//
//  1. UnsupportedType: rom, or a device type that cannot hold a physical volume.
//  2. ReadOnly: the kernel reports the device read-only.
//  3. Suspended: a suspended device-mapper device.
//  4. TooSmall: smaller than the minimum size (DefaultMinSize, 128 MiB: more than a thin pool's
//     metadata and spare need, small enough for loop devices of a few hundred MiB in tests).
//  5. ReservedPartition: a BIOS boot, EFI system, /boot or reserved partition (by type or label).
//  6. HasChildren: partitions or holders (device-mapper, md) sit on the device.
//  7. Mounted: mounted or used as swap.
//  8. ForeignSignature: a filesystem, partition table or other signature (anything but an LVM label), or
//     the device could not be probed.
//  9. OtherVolumeGroup: an LVM physical volume of a volume group LVMS does not own, or one this agent's
//     LVM devices file does not list (another node's agent, or LVM outside LVMS).
//  10. LogicalVolume: an LVM logical volume (for example one of our own CSI volumes).
//  11. KubeletLoopDevice: a loop device backing a Kubernetes volume.
//  12. MultipathComponent: one path of a multipath device (select the multipath device instead).
//  13. UsedByOtherVolumeGroup: already a physical volume of another of our volume groups, or picked by
//     one that claims it first (volume groups that name the device explicitly claim before wildcards,
//     then spec order).
//  14. StaticDiscovery: a new device for a volume group that uses static discovery and already exists.
//
// Devices that are physical volumes of the volume group itself are its members whatever the filters say.
// Logical volumes of our own volume groups are not listed for wildcard selectors (they would fill the
// status with every volume). Every list is sorted by device name.
package filter
