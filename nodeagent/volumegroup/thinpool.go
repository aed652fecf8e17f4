package volumegroup

import (
	"cmp"
	"context"
	"fmt"

	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// minMetadataSize is lvm2's smallest thin pool metadata.
const minMetadataSize = 2 << 20

// estimateMetadata is the metadata a pool of dataBytes needs (lvm2's rule: 64 bytes per chunk, at least
// 2 MiB); chunk 0 means lvm2's default of 64 KiB.
func estimateMetadata(dataBytes, chunk uint64) uint64 {
	if chunk == 0 {
		chunk = 64 << 10
	}
	return max(dataBytes/chunk*64, minMetadataSize)
}

func ceilDiv(a, b uint64) uint64 {
	if b == 0 {
		return 0
	}
	return (a + b - 1) / b
}

// thinPools creates, grows and checks the volume group's thin pools.
func (p *vgPass) thinPools(ctx context.Context, vg lvm.VG) {
	if len(p.vg.ThinPools) == 0 {
		return
	}
	if missing := p.in.Capabilities.Missing(lvm.TargetThinPool); len(missing) > 0 {
		why := p.in.Capabilities.Reason
		if why == "" {
			why = fmt.Sprintf("the kernel has no device-mapper %s target (load %s)", lvm.TargetThinPool, lvm.ModuleFor(lvm.TargetThinPool))
		}
		for _, tp := range p.vg.ThinPools {
			pool := Pool{Name: tp.Name, Problem: "thin pool " + tp.Name + " cannot be created: " + why}
			if lv, ok := p.in.Report.LV(vg.Name, tp.Name); ok {
				pool.LV, pool.Problem = &lv, "thin pool "+tp.Name+" cannot be activated: "+why
			}
			p.res.Pools = append(p.res.Pools, pool)
			p.problem(PhaseDegraded, "%s", pool.Problem)
		}
		return
	}
	free := vg.FreeCount
	for _, tp := range p.vg.ThinPools {
		pool := Pool{Name: tp.Name, DataUsageThreshold: tp.DataUsageThreshold, MetadataUsageThreshold: tp.MetadataUsageThreshold}
		lv, ok := p.in.Report.LV(vg.Name, tp.Name)
		switch {
		case !ok:
			free = p.createPool(ctx, vg, tp, free, &pool)
		case !lv.IsThinPool():
			pool.Problem = fmt.Sprintf("a logical volume named %s exists in %s and is not a thin pool; rename it or choose another poolName", tp.Name, vg.Name)
			p.problem(PhaseFailed, "%s", pool.Problem)
		default:
			pool.LV = &lv
			free = p.growPool(ctx, vg, tp, lv, free, &pool)
			free = p.autoextend(ctx, vg, tp, lv, free, &pool)
			p.checkPool(ctx, vg, tp, lv, &pool)
		}
		p.res.Pools = append(p.res.Pools, pool)
	}
}

// poolTarget is the data size in extents sizePercent asks for.
func poolTarget(vg lvm.VG, tp desired.ThinPool) uint64 {
	return vg.ExtentCount * uint64(tp.SizePercent) / 100
}

func (p *vgPass) createPool(ctx context.Context, vg lvm.VG, tp desired.ThinPool, free uint64, pool *Pool) uint64 {
	if vg.ExtentSize == 0 {
		return free
	}
	extents := poolTarget(vg, tp)
	meta := tp.MetadataSize
	if meta == 0 {
		meta = estimateMetadata(extents*vg.ExtentSize, tp.ChunkSize)
	}
	// The pool needs its metadata and a spare copy of the metadata (pmspare) besides the data.
	reserve := 2 * ceilDiv(meta, vg.ExtentSize)
	if extents+reserve > free {
		if free <= reserve {
			pool.Problem = fmt.Sprintf("thin pool %s cannot be created: volume group %s has %d free extents, not enough for the pool's metadata", tp.Name, vg.Name, free)
			p.problem(PhaseFailed, "%s", pool.Problem)
			return free
		}
		extents = free - reserve
	}
	err := p.e.Runner.CreateThinPool(ctx, lvm.ThinPool{VG: vg.Name, Name: tp.Name, Extents: extents, ChunkSize: tp.ChunkSize,
		MetadataSize: tp.MetadataSize, Tags: []string{lvm.OwnerTag}})
	if err != nil {
		pool.Problem = err.Error()
		p.problem(PhaseFailed, "%v", err)
		p.event(true, "ThinPoolCreateFailed", "%v", err)
		return free
	}
	p.res.Changed = true
	p.problem(PhaseProgressing, "created thin pool %s; checking it again", tp.Name)
	p.event(false, "ThinPoolCreated", "created thin pool %s/%s with %d extents (%d%% of the volume group)", vg.Name, tp.Name, extents, tp.SizePercent)
	return free - extents - reserve
}

// growPool extends the pool to sizePercent of a volume group that grew, and its metadata to the requested
// (or needed) size.
func (p *vgPass) growPool(ctx context.Context, vg lvm.VG, tp desired.ThinPool, lv lvm.LV, free uint64, pool *Pool) uint64 {
	if vg.ExtentSize == 0 {
		return free
	}
	current := lv.Size / vg.ExtentSize
	target := poolTarget(vg, tp)
	wantMeta := tp.MetadataSize
	if wantMeta == 0 {
		wantMeta = estimateMetadata(target*vg.ExtentSize, lv.ChunkSize)
	}
	if wantMeta > lv.MetadataSize && lv.MetadataSize > 0 {
		grow := ceilDiv(wantMeta-lv.MetadataSize, vg.ExtentSize)
		if grow <= free {
			if err := p.e.Runner.ExtendPoolMetadata(ctx, vg.Name, tp.Name, lv.MetadataSize+grow*vg.ExtentSize); err != nil {
				pool.Problem = err.Error()
				p.problem(PhaseDegraded, "%v", err)
				return free
			}
			free -= grow
			p.res.Changed = true
			p.event(false, "ThinPoolMetadataExtended", "extended the metadata of thin pool %s/%s to %s", vg.Name, tp.Name, humanBytes(lv.MetadataSize+grow*vg.ExtentSize))
		}
	} else if tp.MetadataSize > 0 && tp.MetadataSize < lv.MetadataSize {
		p.problem(PhaseDegraded, "thin pool %s has %s of metadata; the requested %s is smaller and lvm2 cannot shrink metadata", tp.Name, humanBytes(lv.MetadataSize), humanBytes(tp.MetadataSize))
	}
	if target <= current {
		return free
	}
	extents := min(target, current+free)
	if extents <= current {
		return free
	}
	if err := p.e.Runner.ExtendLV(ctx, vg.Name, tp.Name, extents); err != nil {
		pool.Problem = err.Error()
		p.problem(PhaseDegraded, "%v", err)
		p.event(true, "ThinPoolExtendFailed", "%v", err)
		return free
	}
	p.res.Changed = true
	p.problem(PhaseProgressing, "extended thin pool %s; checking it again", tp.Name)
	p.event(false, "ThinPoolExtended", "extended thin pool %s/%s to %d extents (%d%% of the volume group)", vg.Name, tp.Name, extents, tp.SizePercent)
	return free - (extents - current)
}

// autoextend grows a pool whose data passed the device class's threshold by its percent, into the volume
// group's free space (the part sizePercent leaves, or a new device). dmeventd would do this on the host,
// but it runs outside the agent's devices file and not at all in many images: the agent does it on its
// passes.
func (p *vgPass) autoextend(ctx context.Context, vg lvm.VG, tp desired.ThinPool, lv lvm.LV, free uint64, pool *Pool) uint64 {
	threshold, percent := cmp.Or(tp.AutoextendThreshold, desired.DefaultAutoextendThreshold), cmp.Or(tp.AutoextendPercent, desired.DefaultAutoextendPercent)
	data, err := lvm.ParsePercent(lv.DataPercent)
	if err != nil || threshold >= 100 || data < float64(threshold) || vg.ExtentSize == 0 || !lv.Active() {
		return free
	}
	current := lv.Size / vg.ExtentSize
	grow := min(max(current*uint64(percent)/100, 1), free)
	if grow == 0 {
		pool.Alarm = fmt.Sprintf("thin pool %s data is %.1f%% full and volume group %s has no free space to grow it: writes fail once it is full; add a device or delete volumes", tp.Name, data, vg.Name)
		return free
	}
	if err := p.e.Runner.ExtendLV(ctx, vg.Name, tp.Name, current+grow); err != nil {
		pool.Problem = err.Error()
		p.problem(PhaseDegraded, "%v", err)
		p.event(true, "ThinPoolExtendFailed", "%v", err)
		return free
	}
	p.res.Changed = true
	p.event(false, "ThinPoolAutoextended", "thin pool %s/%s was %.1f%% full (threshold %d%%): grew it by %d extents to %d", vg.Name, tp.Name, data, threshold, grow, current+grow)
	return free - grow
}

// checkPool activates an inactive pool and raises the usage alarm.
func (p *vgPass) checkPool(ctx context.Context, vg lvm.VG, tp desired.ThinPool, lv lvm.LV, pool *Pool) {
	if !lv.Active() {
		if err := p.e.Runner.ActivateLV(ctx, vg.Name, tp.Name); err != nil {
			pool.Problem = err.Error()
			p.problem(PhaseDegraded, "thin pool %s is inactive: %v", tp.Name, err)
			return
		}
		p.res.Changed = true
	}
	if tp.ChunkSize > 0 && lv.ChunkSize > 0 && tp.ChunkSize != lv.ChunkSize {
		p.problem(PhaseDegraded, "thin pool %s has chunk size %s, not the requested %s; the chunk size of an existing pool cannot change", tp.Name, humanBytes(lv.ChunkSize), humanBytes(tp.ChunkSize))
	}
	meta, _ := lvm.ParsePercent(lv.MetadataPercent)
	data, _ := lvm.ParsePercent(lv.DataPercent)
	switch {
	case meta >= MetadataCriticalPercent:
		pool.Alarm = fmt.Sprintf("thin pool %s metadata is %.1f%% full: new volumes and writes fail when it is full; add a device to volume group %s (LVMS grows the metadata) or delete volumes", tp.Name, meta, vg.Name)
	case meta >= float64(cmp.Or(tp.MetadataUsageThreshold, MetadataWarnPercent)):
		pool.Alarm = fmt.Sprintf("thin pool %s metadata is %.1f%% full (threshold %d%%): no new volume is placed on it; add a device to volume group %s or delete volumes before it fills up",
			tp.Name, meta, cmp.Or(tp.MetadataUsageThreshold, MetadataWarnPercent), vg.Name)
	case data >= float64(cmp.Or(tp.DataUsageThreshold, DataWarnPercent)):
		pool.Alarm = fmt.Sprintf("thin pool %s data is %.1f%% full (threshold %d%%): no new volume is placed on it; add a device to volume group %s or delete volumes before it fills up",
			tp.Name, data, cmp.Or(tp.DataUsageThreshold, DataWarnPercent), vg.Name)
	}
	if pool.Alarm != "" {
		p.problem(PhaseDegraded, "%s", pool.Alarm)
		p.event(true, "ThinPoolUsageHigh", "%s", pool.Alarm)
	}
}
