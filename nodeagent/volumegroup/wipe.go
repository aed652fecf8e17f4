package volumegroup

import (
	"context"
	"slices"
	"strings"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/filter"
)

// wipeable are the exclusions a forced wipe resolves. Anything else (mounted, read-only, our own volume
// group, too small, ...) is never wiped.
var wipeable = []lvmv2.ReasonCode{lvmv2.ReasonForeignSignature, lvmv2.ReasonOtherVolumeGroup, lvmv2.ReasonHasChildren}

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
		if at, done := p.e.Wipes.Wiped(p.vg.Name, path); done {
			p.problem(PhaseDegraded, "%s was wiped by LVMS at %s and has data again; LVMS wipes a device only once, so wipe it by hand (wipefs --all %s) if it should be used",
				dev.KName, at.UTC().Format("2006-01-02T15:04:05Z"), dev.KName)
			continue
		}
		if why := p.unsafeToWipe(dev); why != "" {
			p.problem(PhaseDegraded, "%s is not wiped: %s", dev.KName, why)
			continue
		}
		if err := p.wipeDevice(ctx, dev); err != nil {
			p.problem(PhaseFailed, "wipe %s: %v", dev.KName, err)
			p.event(true, "DeviceWipeFailed", "wipe %s: %v", dev.KName, err)
			continue
		}
		at := p.e.now()
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

// unsafeToWipe says why a device must not be wiped even though the selector names it.
func (p *vgPass) unsafeToWipe(dev *blockdev.Device) string {
	for _, d := range append([]*blockdev.Device{dev}, descendants(p.in.Inventory, dev)...) {
		if d.Mounted() {
			return d.KName + " is mounted at " + strings.Join(d.MountPoints, ", ")
		}
		if d != dev && d.Type != blockdev.TypePart && !d.IsDeviceMapper() {
			return "it holds " + d.KName + " (" + d.Type + "), which LVMS does not take apart"
		}
	}
	return ""
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
