package filter

import (
	"fmt"
	"slices"
	"strings"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
)

// check is one filter: it returns a reason when it rejects the device.
type check struct {
	code lvmv2.ReasonCode
	fn   func(p *pass, d *blockdev.Device) string
}

// checks run in this order (the order documented in doc.go and in api/lvm/v2alpha1/conditions.go).
var checks = []check{
	{lvmv2.ReasonUnsupportedType, unsupportedType},
	{lvmv2.ReasonReadOnly, readOnly},
	{lvmv2.ReasonSuspended, suspended},
	{lvmv2.ReasonTooSmall, tooSmall},
	{lvmv2.ReasonReservedPartition, reservedPartition},
	{lvmv2.ReasonHasChildren, hasChildren},
	{lvmv2.ReasonMounted, mounted},
	{lvmv2.ReasonForeignSignature, foreignSignature},
	{lvmv2.ReasonOtherVolumeGroup, otherVolumeGroup},
	{lvmv2.ReasonLogicalVolume, logicalVolume},
	{lvmv2.ReasonKubeletLoopDevice, kubeletLoopDevice},
	{lvmv2.ReasonMultipathComponent, multipathComponent},
	{lvmv2.ReasonInUse, inUse},
	{lvmv2.ReasonPersistentVolume, persistentVolume},
}

// inUse: besides mounts and holders, someone may hold the raw device (a VM disk, a database, mkfs).
func inUse(_ *pass, d *blockdev.Device) string {
	if d.Busy == "" {
		return ""
	}
	return fmt.Sprintf("%s is in use: another program holds it open exclusively (%s)", d.KName, d.Busy)
}

// persistentVolume: a local PersistentVolume or a VM disk names the device; its data is someone's.
func persistentVolume(p *pass, d *blockdev.Device) string {
	pv, ok := p.in.ReferencedBy[d.KName]
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s is used by PersistentVolume %s", d.KName, pv)
}

// filter runs every check and collects the reasons, in order.
func (p *pass) filter(d *blockdev.Device) []Reason {
	var out []Reason
	for _, c := range checks {
		if msg := c.fn(p, d); msg != "" {
			out = append(out, Reason{Code: c.code, Message: msg})
		}
	}
	return out
}

// supportedTypes can hold a physical volume (lvm is reported as LogicalVolume instead).
var supportedTypes = []string{blockdev.TypeDisk, blockdev.TypePart, blockdev.TypeLoop, blockdev.TypeCrypt,
	blockdev.TypeMpath, blockdev.TypeDM, blockdev.TypeLVM, "md", "raid0", "raid1", "raid4", "raid5", "raid6", "raid10", "linear"}

func unsupportedType(_ *pass, d *blockdev.Device) string {
	if slices.Contains(supportedTypes, d.Type) {
		return ""
	}
	return fmt.Sprintf("%s has a device type of %q, which cannot hold a physical volume", d.KName, d.Type)
}

func readOnly(_ *pass, d *blockdev.Device) string {
	if !d.ReadOnly {
		return ""
	}
	return fmt.Sprintf("%s is read-only and cannot be used", d.KName)
}

func suspended(_ *pass, d *blockdev.Device) string {
	if d.State != "suspended" {
		return ""
	}
	return fmt.Sprintf("%s is in a suspended state and cannot be used; resume it (dmsetup resume) first", d.KName)
}

func tooSmall(p *pass, d *blockdev.Device) string {
	if d.Size >= p.minSize {
		return ""
	}
	return fmt.Sprintf("%s is %s, smaller than the minimum of %s for a physical volume", d.KName, humanBytes(d.Size), humanBytes(p.minSize))
}

// Partition type GUIDs (GPT) and MBR types of boot and reserved partitions.
var (
	bootPartTypes = []string{
		"21686148-6449-6e6f-744e-656564454649", // BIOS boot
		"c12a7328-f81f-11d2-ba4b-00a0c93ec93b", // EFI system
		"bc13c2ff-59e6-4262-a352-b275fd6f7172", // extended boot loader
		"0xef",                                 // MBR EFI
	}
	reservedPartTypes = []string{
		"e3c9e316-0b5c-4db8-817d-f92df00215ae", // Microsoft reserved
		"8da63339-0007-60c0-c436-083ac8230908", // Linux reserved
	}
)

func reservedPartition(_ *pass, d *blockdev.Device) string {
	if d.Type != blockdev.TypePart {
		return ""
	}
	typ, label := strings.ToLower(d.PartType), strings.ToLower(d.PartLabel)
	switch {
	case slices.Contains(bootPartTypes, typ) || strings.Contains(label, "boot") || strings.Contains(label, "bios") || strings.Contains(label, "efi"):
		return fmt.Sprintf("%s was used as a boot partition and cannot be used", d.KName)
	case slices.Contains(reservedPartTypes, typ) || strings.Contains(label, "reserved"):
		return fmt.Sprintf("%s is a reserved partition (label %q) and cannot be used", d.KName, d.PartLabel)
	}
	return ""
}

func hasChildren(p *pass, d *blockdev.Device) string {
	var children []string
	for _, c := range d.Children {
		if child, ok := p.in.Inventory.Get(c); ok && child.Type == blockdev.TypeMpath {
			continue // a multipath path: MultipathComponent explains it
		}
		children = append(children, c)
	}
	if len(children) == 0 {
		return ""
	}
	return fmt.Sprintf("%s has partitions or holders (%s) and cannot be used as a whole", d.KName, strings.Join(children, ", "))
}

func mounted(_ *pass, d *blockdev.Device) string {
	if !d.Mounted() {
		return ""
	}
	if slices.Contains(d.MountPoints, "[SWAP]") {
		return fmt.Sprintf("%s is used as swap and cannot be used", d.KName)
	}
	return fmt.Sprintf("%s is mounted at %s and cannot be used", d.KName, strings.Join(d.MountPoints, ", "))
}

func foreignSignature(_ *pass, d *blockdev.Device) string {
	if len(d.Children) > 0 || d.Mounted() {
		// What is built on the device explains its signature (partition table, LVM label, RAID member,
		// LUKS header, mounted filesystem); wiping it would be wrong advice.
		return ""
	}
	if d.ProbeError != "" {
		return fmt.Sprintf("%s could not be checked for existing data (%s) and is not used", d.KName, d.ProbeError)
	}
	var sigs []string
	for _, s := range d.ForeignSignatures() {
		if s != blockdev.SigMpath { // MultipathComponent explains it
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return ""
	}
	what := "a " + strings.Join(sigs, " and ") + " signature"
	if len(sigs) == 1 && (sigs[0] == blockdev.SigGPT || sigs[0] == blockdev.SigDOSTable || sigs[0] == blockdev.SigPMBR) {
		what = "a " + sigs[0] + " partition table"
	} else if len(sigs) == 1 {
		what = "a " + sigs[0] + " filesystem signature"
	}
	return fmt.Sprintf("%s has %s and cannot be used; to use it, wipe it (wipefs --all %s) or set forceWipeDevicesAndDestroyAllData on a selector that names it", d.KName, what, d.KName)
}

func otherVolumeGroup(p *pass, d *blockdev.Device) string {
	if !d.HasSignature(blockdev.SigLVM2) {
		return ""
	}
	vg, known := p.pvVG[d.KName]
	switch {
	case known && vg == "":
		return "" // an orphan physical volume: usable
	case known && !p.ours[vg]:
		return fmt.Sprintf("%s is a physical volume of volume group %s, which LVMS does not manage", d.KName, vg)
	case known:
		return "" // one of ours: assign() decides
	case p.in.Scoped:
		return fmt.Sprintf("%s carries an LVM label but is not in this node agent's LVM devices file: it belongs to another node's agent or to LVM outside LVMS", d.KName)
	default:
		return fmt.Sprintf("%s carries an LVM label that LVM does not report (filtered by lvm.conf or a duplicate) and cannot be used", d.KName)
	}
}

func logicalVolume(p *pass, d *blockdev.Device) string {
	if d.Type != blockdev.TypeLVM {
		return ""
	}
	if vg := p.lvOwner[d.KName]; vg != "" && p.ours[vg] {
		return fmt.Sprintf("%s is a logical volume of %s (LVMS volumes cannot be physical volumes)", d.Name, vg)
	}
	return fmt.Sprintf("%s is a logical volume and cannot be a physical volume", d.Name)
}

func kubeletLoopDevice(_ *pass, d *blockdev.Device) string {
	if d.Type != blockdev.TypeLoop || d.BackingFile == "" {
		return ""
	}
	if !strings.Contains(d.BackingFile, "/kubelet/") && !strings.Contains(d.BackingFile, "plugins/kubernetes.io") {
		return ""
	}
	return fmt.Sprintf("%s is a loop device backing a Kubernetes volume (%s) and cannot be used", d.KName, d.BackingFile)
}

func multipathComponent(p *pass, d *blockdev.Device) string {
	for _, c := range d.Children {
		if child, ok := p.in.Inventory.Get(c); ok && child.Type == blockdev.TypeMpath {
			return fmt.Sprintf("%s is a path of multipath device %s; select %s instead", d.KName, child.Name, child.Name)
		}
	}
	if d.FSType == blockdev.SigMpath {
		return fmt.Sprintf("%s is a path of a multipath device; select the multipath device (/dev/mapper/...) instead", d.KName)
	}
	return ""
}

// humanBytes renders a size with a binary unit, rounded down to one decimal.
func humanBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == float64(uint64(v)) {
		return fmt.Sprintf("%d %s", uint64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", float64(uint64(v*10))/10, units[i])
}
