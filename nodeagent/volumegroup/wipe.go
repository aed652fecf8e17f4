package volumegroup

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/filter"
)

// wipeable are the exclusions a forced wipe looks at: it resolves old signatures, partitions and unused
// device-mapper devices, and says why it refuses the rest (another volume group, a PersistentVolume's
// device, a device held open). Anything else (mounted, read-only, our own volume group, too small, ...) is
// never wiped.
var wipeable = []lvmv2.ReasonCode{lvmv2.ReasonForeignSignature, lvmv2.ReasonOtherVolumeGroup, lvmv2.ReasonHasChildren,
	lvmv2.ReasonPersistentVolume, lvmv2.ReasonInUse}

// wipe wipes the devices the volume group names explicitly that only old data keeps from being used, once
// per device. It returns true when it wiped something: the caller discovers again before using them.
func (p *vgPass) wipe(ctx context.Context) bool {
	if !p.vg.ForceWipe || p.e.Wipes == nil {
		return false
	}
	wiped := false
	for _, ex := range p.res.Filter.Excluded {
		if ex.Match == nil || !ex.Match.Explicit || !onlyWipeable(ex) {
			continue
		}
		dev, ok := p.in.Inventory.Get(ex.KName)
		if !ok {
			continue
		}
		path := ex.Match.Path
		if path == "" {
			path = dev.KName
		}
		if why := p.mayWipe(dev, path); why != "" {
			p.problem(PhaseDegraded, "%s is not wiped: %s", dev.KName, why)
			continue
		}
		at := p.e.now()
		if err := p.e.Wipes.Begin(ctx, p.vg.Name, path, at); err != nil {
			p.problem(PhaseDegraded, "%s is not wiped: the intent to wipe could not be recorded (%v); LVMS wipes only what it has recorded", dev.KName, err)
			continue
		}
		if err := p.wipeDevice(ctx, dev); err != nil {
			p.problem(PhaseFailed, "wipe %s: %v", dev.KName, err)
			p.event(true, "DeviceWipeFailed", "wipe %s: %v", dev.KName, err)
			continue
		}
		if err := p.e.Wipes.Record(ctx, p.vg.Name, path, at); err != nil {
			p.problem(PhaseFailed, "wiped %s but could not record it (%v); LVMS does not use the device until the wipe is recorded", dev.KName, err)
			continue
		}
		p.res.Wiped[dev.KName] = at
		p.res.Changed, wiped = true, true
		p.event(false, "DeviceWiped", "wiped %s (%s) for volume group %s as forceWipeDevicesAndDestroyAllData requests; LVMS never wipes it again",
			dev.KName, strings.Join(ex.Messages(), "; "), p.vg.Name)
	}
	if wiped {
		p.problem(PhaseProgressing, "wiped devices for volume group %s; creating it on the next pass", p.vg.Name)
	}
	return wiped
}

func onlyWipeable(ex filter.Excluded) bool {
	for _, c := range reasonCodes(ex) {
		if !slices.Contains(wipeable, c) {
			return false
		}
	}
	return len(ex.Reasons) > 0
}

// descendants returns the devices built on dev, deepest first.
func descendants(inv *blockdev.Inventory, dev *blockdev.Device) []*blockdev.Device {
	var out []*blockdev.Device
	seen := map[string]bool{}
	var walk func(d *blockdev.Device)
	walk = func(d *blockdev.Device) {
		for _, k := range d.Children {
			c, ok := inv.Get(k)
			if !ok || seen[k] {
				continue
			}
			seen[k] = true
			walk(c)
			out = append(out, c)
		}
	}
	walk(dev)
	return out
}

// mayWipe says why a device the selector names must not be wiped, or "" when it may: it was wiped (or a
// wipe began) before, the records cannot be read, it is named by a kernel name, or something uses or owns it.
func (p *vgPass) mayWipe(dev *blockdev.Device, path string) string {
	rec, done, err := p.e.Wipes.Wiped(p.vg.Name, path)
	switch {
	case err != nil:
		return fmt.Sprintf("the wipe records cannot be read (%v), and LVMS wipes nothing it cannot prove it never wiped; repair or remove the record", err)
	case done && rec.Done:
		return fmt.Sprintf("it was wiped by LVMS at %s and has data again; LVMS wipes a device only once, so wipe it by hand (wipefs --all %s) if it should be used",
			rec.At.UTC().Format(time.RFC3339), dev.KName)
	case done:
		return fmt.Sprintf("LVMS began wiping it at %s and never confirmed the wipe (the agent stopped?); LVMS wipes a device only once, so check it and wipe it by hand (wipefs --all %s) if it should be used",
			rec.At.UTC().Format(time.RFC3339), dev.KName)
	case !stableName(path):
		return fmt.Sprintf("forceWipeDevicesAndDestroyAllData wipes only devices named by /dev/disk/by-id/ or /dev/disk/by-path/ (%s is a kernel name, which can point at another disk after a reboot)%s",
			path, stableNamesOf(dev))
	}
	return p.unsafeToWipe(dev)
}

// stableName: by-id and by-path names follow the disk; kernel names (/dev/sdb) follow the probe order.
func stableName(path string) bool {
	return strings.HasPrefix(path, "/dev/disk/by-id/") || strings.HasPrefix(path, "/dev/disk/by-path/")
}

func stableNamesOf(dev *blockdev.Device) string {
	var names []string
	for _, l := range dev.Links {
		if stableName(l) {
			names = append(names, l)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; name it as " + strings.Join(names, " or ")
}

// unsafeToWipe says why a device must not be wiped even though the selector names it: anything on it or
// built on it that someone may use. LVMS takes apart only partitions and unused device-mapper devices.
func (p *vgPass) unsafeToWipe(dev *blockdev.Device) string {
	if vg := p.otherVolumeGroup(dev); vg != "" {
		return fmt.Sprintf("it is a physical volume of volume group %s, which LVMS never wipes; remove that volume group (vgremove %s, pvremove %s) if its data is no longer needed",
			vg, vg, dev.KName)
	}
	if pv, ok := p.in.ReferencedBy[dev.KName]; ok {
		return fmt.Sprintf("PersistentVolume %s uses it (a local or VM disk); delete that PersistentVolume first", pv)
	}
	if dev.Busy != "" {
		return fmt.Sprintf("another program holds it open exclusively (%s)", dev.Busy)
	}
	for _, d := range append([]*blockdev.Device{dev}, descendants(p.in.Inventory, dev)...) {
		switch {
		case d.Mounted():
			return d.KName + " is mounted at " + strings.Join(d.MountPoints, ", ")
		case d.HasSignature("crypto_LUKS"):
			return d.KName + " holds a LUKS encrypted volume, which LVMS never wipes"
		case d != dev && d.Type != blockdev.TypePart && !d.IsDeviceMapper():
			return "it holds " + d.KName + " (" + d.Type + "), which LVMS does not take apart"
		case d.IsDeviceMapper():
			if n, err := p.openCount(d); err != nil {
				return fmt.Sprintf("the open count of %s cannot be read (%v)", d.KName, err)
			} else if n > 0 {
				return fmt.Sprintf("%s (%s) is open %d time(s): something uses it", d.KName, d.Name, n)
			}
		}
	}
	return ""
}

// otherVolumeGroup is the volume group (not this one) whose physical volume dev is. The agent's report
// sees only the devices in its own devices file, so an LVM label outside it is read directly: an orphan
// label (no volume group) is old data, a label of a volume group is someone's disk.
func (p *vgPass) otherVolumeGroup(dev *blockdev.Device) string {
	for _, pv := range p.in.Report.PVs {
		if (pv.Name == dev.KName || slices.Contains(dev.Links, pv.Name)) && pv.VGName != "" && pv.VGName != p.vg.Name {
			return pv.VGName
		}
	}
	if !dev.HasSignature("LVM2_member") {
		return ""
	}
	out, err := p.e.Runner.Run(context.Background(), "lvm", "pvs", "--noheadings", "-o", "vg_name", "--devices", dev.KName, dev.KName)
	if err != nil {
		return fmt.Sprintf("(unknown: its LVM label cannot be read: %v)", err)
	}
	if vg := strings.TrimSpace(string(out)); vg != "" && vg != p.vg.Name {
		return vg
	}
	return ""
}

// openCount asks device-mapper how many openers a device has (a mounted file system, a VM, dd).
func (p *vgPass) openCount(d *blockdev.Device) (int, error) {
	out, err := p.e.Runner.Run(context.Background(), "dmsetup", "info", "-c", "--noheadings", "-o", "open", d.Name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}

// wipeDevice removes the device-mapper devices on top of dev (deepest first), wipes its partitions and
// the device itself, and asks the kernel to forget the partitions.
func (p *vgPass) wipeDevice(ctx context.Context, dev *blockdev.Device) error {
	r := p.e.Runner
	hadParts := false
	for _, d := range descendants(p.in.Inventory, dev) {
		if d.IsDeviceMapper() {
			if _, err := r.Run(ctx, "dmsetup", "remove", "--force", d.Name); err != nil {
				return err
			}
			continue
		}
		hadParts = true
		if _, err := r.Run(ctx, "wipefs", "--all", "--force", d.KName); err != nil {
			return err
		}
	}
	if _, err := r.Run(ctx, "wipefs", "--all", "--force", dev.KName); err != nil {
		return err
	}
	if hadParts {
		_, _ = r.Run(ctx, "blockdev", "--rereadpt", dev.KName) // best effort: the partitions are gone from disk either way
	}
	return nil
}
