package explain

import (
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// reasonOrder is the node agent's filter order; Codes returns it.
var reasonOrder = []lvmv2.ReasonCode{
	lvmv2.ReasonNotFound, lvmv2.ReasonNotSelected, lvmv2.ReasonUnsupportedType, lvmv2.ReasonReadOnly,
	lvmv2.ReasonSuspended, lvmv2.ReasonTooSmall, lvmv2.ReasonReservedPartition, lvmv2.ReasonHasChildren,
	lvmv2.ReasonMounted, lvmv2.ReasonForeignSignature, lvmv2.ReasonOtherVolumeGroup, lvmv2.ReasonLogicalVolume,
	lvmv2.ReasonKubeletLoopDevice, lvmv2.ReasonMultipathComponent, lvmv2.ReasonUsedByOtherVolumeGroup,
	lvmv2.ReasonStaticDiscovery, lvmv2.ReasonInUse, lvmv2.ReasonPersistentVolume,
}

// Codes returns every exclusion reason code this console explains, in the node agent's filter order.
func Codes() []string {
	out := make([]string, len(reasonOrder))
	for i, c := range reasonOrder {
		out[i] = string(c)
	}
	return out
}

// Filter names the check that produces a reason code ("path exists", "writable", ...), or returns the code
// itself for unknown codes.
func Filter(code string) string {
	if e, ok := reasons[lvmv2.ReasonCode(code)]; ok {
		return e.filter
	}
	return code
}

// Reason explains why a device was excluded. Unknown codes get an explanation built from the agent's
// sentence in c.Sentence.
func Reason(code string, c Context) Explanation {
	if e, ok := reasons[lvmv2.ReasonCode(code)]; ok {
		return e.render(code, c)
	}
	why := c.Sentence
	if why == "" {
		why = "The node agent excluded {device} with a reason this console does not know."
	}
	return Explanation{
		Code:     code,
		Known:    false,
		Title:    code,
		Why:      c.fill(why),
		Severity: Warning,
		Next: []Step{
			{Text: c.fill("The node agent on {node} is newer than this console and used reason code " + code +
				"; its sentence above is the best description. Upgrade the console (the lvms binary) to get an explanation and next steps.")},
		},
	}
}

// ReasonSeverity is the severity of Reason(code, …), without rendering its text.
func ReasonSeverity(code string) Severity {
	if e, ok := reasons[lvmv2.ReasonCode(code)]; ok {
		return e.severity
	}
	return Warning
}

var reasons = map[lvmv2.ReasonCode]entry{
	lvmv2.ReasonNotFound: {
		title:    "Path not found on the node",
		filter:   "path exists",
		severity: Error,
		why: "The device selector names {device}, but no device with that path exists on {node}. The disk may not be " +
			"attached, may have a different name on this node (/dev/sdX names can change between boots), or the path has a typo.",
		next: []Step{
			{Text: "Check whether the disk is visible and under which names." + onNode,
				Command: "lsblk --paths -o NAME,KNAME,TYPE,SIZE,SERIAL,WWN,MODEL; ls -l /dev/disk/by-id/"},
			{Text: "If the disk is there under another name, change the selector to a stable path such as " +
				"/dev/disk/by-id/wwn-… or /dev/disk/by-path/…, which stay the same across reboots."},
			{Text: "If the disk should be attached, attach it (cloud volume, SAN mapping, cabling); the node agent picks it up on its next pass."},
			{Text: "If the device is not needed on every node, make it optional: v1alpha1 deviceSelector.optionalPaths, " +
				"or in v2alpha1 a separate deviceSelectorTerm so a missing device does not degrade the volume group."},
		},
	},
	lvmv2.ReasonNotSelected: {
		title:    "Not chosen by the device selector",
		filter:   "selected by the device selector",
		severity: Info,
		why:      "{device} exists on {node}, but no term of the volume group's device selector matches it, so LVMS leaves it alone.",
		next: []Step{
			{Text: "Nothing to do if the device is not meant for LVMS."},
			{Text: "To use it, add it to the device selector of volume group {vg}, preferably by a stable path " +
				"(key path with a /dev/disk/by-id/… value), or widen a term (model, serial, size) so it matches."},
		},
	},
	lvmv2.ReasonUnsupportedType: {
		title:    "Device type cannot hold a physical volume",
		filter:   "supported device type",
		severity: Info,
		why:      "{device} is a device type LVM cannot use as a physical volume, such as a CD/DVD drive (rom).",
		next: []Step{
			{Text: "Nothing to do: LVMS never uses such devices. Narrow the selector (for example key type, operator In, values [disk, part]) to stop listing it."},
		},
	},
	lvmv2.ReasonReadOnly: {
		title:    "Device is read-only",
		filter:   "writable",
		severity: Warning,
		why:      "The kernel reports {device} on {node} as read-only, so LVM cannot write a physical volume label to it.",
		next: []Step{
			{Text: "Confirm (1 means read-only)." + onNode, Command: "blockdev --getro {device}; lsblk -o NAME,RO {device}"},
			{Text: "Fix it where the device comes from: a cloud volume or SAN LUN attached read-only, a write-protect switch, or a read-only device-mapper table. " +
				"The node agent retries on its next pass."},
		},
	},
	lvmv2.ReasonSuspended: {
		title:    "Device-mapper device is suspended",
		filter:   "not suspended",
		severity: Warning,
		why:      "{device} is a device-mapper device in the suspended state: I/O to it blocks, so LVMS does not touch it.",
		next: []Step{
			{Text: "See its state and who owns it." + onNode, Command: "dmsetup info {device}; dmsetup ls --tree"},
			{Text: "A suspend is normally brief (during a table reload). If it stays suspended, find the tool that suspended it; " +
				"resume it only when you know nothing is reconfiguring it.", Command: "dmsetup resume {device}"},
		},
	},
	lvmv2.ReasonTooSmall: {
		title:    "Device is too small",
		filter:   "large enough",
		severity: Info,
		why:      "{device} is smaller than the smallest physical volume LVMS creates, so it would add no usable space.",
		next: []Step{
			{Text: "Use a larger device, or remove this one from the selector of volume group {vg}."},
		},
	},
	lvmv2.ReasonReservedPartition: {
		title:    "Boot, BIOS, EFI or reserved partition",
		filter:   "not a reserved partition",
		severity: Info,
		why:      "{device} is a partition the system needs to boot (its label or type says boot, BIOS, EFI or reserved). LVMS never uses such partitions.",
		next: []Step{
			{Text: "Nothing to do: this is the expected, safe outcome. Narrow the selector if you do not want it listed."},
		},
	},
	lvmv2.ReasonHasChildren: {
		title:    "Device has partitions or holders",
		filter:   "no partitions or holders",
		severity: Warning,
		why: "{device} has partitions, or another device (device-mapper, md RAID, LUKS) is built on top of it. Using the whole " +
			"device would destroy those, so LVMS considers only the children.",
		next: []Step{
			{Text: "See what is on it." + onNode, Command: "lsblk --paths {device}"},
			{Text: "To use a partition or the device built on top (for example /dev/mapper/…), select that device instead of {device}."},
			{Text: "Only if the partitions and everything on them are no longer needed: remove them, and the whole device becomes a candidate.",
				Command: "wipefs --all {device}"},
		},
		warning: wipeWarning,
	},
	lvmv2.ReasonMounted: {
		title:    "Device is mounted or used as swap",
		filter:   "not mounted or swap",
		severity: Warning,
		why:      "{device} is mounted (or is active swap) on {node}: something is using it right now.",
		next: []Step{
			{Text: "See where." + onNode, Command: "findmnt --source {device}; swapon --show"},
			{Text: "If the device is meant for LVMS, stop using it: unmount it (or swapoff), remove it from /etc/fstab, then remove its filesystem signature (see ForeignSignature)."},
			{Text: "Otherwise remove it from the selector of volume group {vg}."},
		},
	},
	lvmv2.ReasonForeignSignature: {
		title:    "Device holds a filesystem or partition table",
		filter:   "no foreign signature",
		severity: Warning,
		why: "{device} carries a filesystem, partition table or other signature (for example an old xfs, vfat or LUKS header). " +
			"LVMS only uses empty devices, so it never overwrites data it did not put there.",
		next: []Step{
			{Text: "See which signature it is." + onNode, Command: "lsblk -f {device}; wipefs --no-act {device}"},
			{Text: "If the data on it is not needed, remove the signatures by hand; the node agent uses the device on its next pass.",
				Command: "wipefs --all {device}"},
			{Text: "Or let LVMS wipe it once: name the device explicitly (key path or kname, operator In) and set " +
				"forceWipeDevicesAndDestroyAllData: true on volume group {vg} (v1alpha1: deviceSelector.forceWipeDevicesAndDestroyAllData)."},
		},
		warning: wipeWarning,
	},
	lvmv2.ReasonOtherVolumeGroup: {
		title:    "Physical volume of a volume group LVMS does not own",
		filter:   "not in a foreign volume group",
		severity: Warning,
		why:      "{device} is already a physical volume of another LVM volume group on {node} that LVMS did not create. LVMS never takes over foreign volume groups.",
		next: []Step{
			{Text: "See which volume group it belongs to." + onNode, Command: "pvs -o pv_name,vg_name,pv_size,pv_free {device}"},
			{Text: "If that volume group is in use, remove {device} from the selector of {vg}."},
			{Text: "Only if that volume group and all its logical volumes are no longer needed: remove them, then the device's PV label.",
				Command: "vgremove <other-vg>; pvremove {device}"},
		},
		warning: "Removing the volume group destroys every logical volume in it and all their data, on every physical volume of that group. " +
			"Check \"lvs <other-vg>\" first.",
	},
	lvmv2.ReasonLogicalVolume: {
		title:    "Device is a logical volume",
		filter:   "not a logical volume",
		severity: Info,
		why:      "{device} is an LVM logical volume, for example one of the CSI volumes LVMS itself created. Stacking a volume group on it is never done.",
		next: []Step{
			{Text: "Nothing to do. Narrow the selector (for example key type, operator NotIn, values [lvm]) to stop listing it."},
		},
	},
	lvmv2.ReasonKubeletLoopDevice: {
		title:    "Loop device used by kubelet",
		filter:   "not a kubelet loop device",
		severity: Info,
		why:      "{device} is a loop device kubelet set up for a block volume of a pod. It belongs to that pod.",
		next: []Step{
			{Text: "Nothing to do. Narrow the selector (for example key type, operator NotIn, values [loop])."},
		},
	},
	lvmv2.ReasonMultipathComponent: {
		title:    "One path of a multipath device",
		filter:   "not a multipath path",
		severity: Warning,
		why:      "{device} is one of several paths to the same LUN, managed by multipathd. Using a single path would break when that path fails, and writing through two paths at once corrupts data.",
		next: []Step{
			{Text: "Find the multipath device for this LUN." + onNode, Command: "multipath -ll; lsblk --paths {device}"},
			{Text: "Select the multipath device (/dev/mapper/mpath… or its /dev/disk/by-id/dm-uuid-mpath-… link) instead of {device}."},
		},
	},
	lvmv2.ReasonUsedByOtherVolumeGroup: {
		title:    "Already used by another LVMS volume group",
		filter:   "not used by another LVMS volume group",
		severity: Info,
		why: "{device} is already in, or was already chosen for, another volume group LVMS manages on {node}. A device belongs to one " +
			"volume group only; a broad selector (for example operator Any) yields it to the volume group that names it.",
		next: []Step{
			{Text: "Nothing to do if the other volume group is where you want it."},
			{Text: "To move it, remove it from the other volume group's selector first; LVMS does not move devices with data between volume groups."},
		},
	},
	lvmv2.ReasonInUse: {
		title:    "Held open by another program",
		filter:   "not in use",
		severity: Warning,
		why:      "{device} could not be opened exclusively: a program holds it (a virtual machine's raw disk, a database, a running mkfs or dd), even though nothing is mounted on it and it carries no signature LVMS can see.",
		next: []Step{
			{Text: "Find who holds it." + onNode, Command: "fuser -v {device}; lsof {device}"},
			{Text: "If that program should not use it, stop it; LVMS takes the device on its next pass. Otherwise narrow the selector."},
		},
	},
	lvmv2.ReasonPersistentVolume: {
		title:    "Used by a PersistentVolume",
		filter:   "not used by a PersistentVolume",
		severity: Warning,
		why:      "{device} is named by a PersistentVolume (a local volume or a VM disk): its data belongs to that volume's claim, so LVMS never takes or wipes it.",
		next: []Step{
			{Text: "Nothing to do if the volume is in use. To give the device to LVMS, delete that PersistentVolume (and its data) first.", Command: "kubectl get pv -o wide | grep {node}"},
		},
	},
	lvmv2.ReasonStaticDiscovery: {
		title:    "New device, but the volume group uses static discovery",
		filter:   "allowed by discovery policy",
		severity: Info,
		why:      "{device} matches the selector of {vg}, but {vg} was created with static device discovery: it keeps the devices it started with and does not grow by itself.",
		next: []Step{
			{Text: "To add the device, name it explicitly in the selector (key path or kname, operator In)."},
			{Text: "Or switch the device class to dynamic discovery (v1alpha1 deviceDiscoveryPolicy: Dynamic), which adds every new matching device."},
		},
	},
}
