package volumegroup

import (
	"context"
	"slices"
	"strings"

	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// delete removes a volume group that is no longer wanted: its thin pools, the volume group and the LVM
// labels of its devices, but only when no user logical volume is left. Otherwise it keeps everything and
// reports ManualCleanupRequired.
func (p *vgPass) delete(ctx context.Context, vg lvm.VG, exists bool) {
	if !exists {
		p.res.Phase = PhaseDeleted
		return
	}
	var pools, user []string
	for _, lv := range p.in.Report.LVsOf(vg.Name) {
		switch {
		case lv.IsPrivate() && !lv.IsThinPool():
			// pool data, metadata and spare go with their pool
		case lv.IsThinPool() && (slices.Contains(lv.Tags, lvm.OwnerTag) || p.desiredPool(lv.Name)):
			pools = append(pools, lv.Name)
		default:
			user = append(user, lv.Name)
		}
	}
	if len(user) > 0 {
		slices.Sort(user)
		p.problem(PhaseManualCleanupRequired, "volume group %s is being deleted but still holds %d logical volume(s) LVMS did not create for itself (%s); delete them (or the PersistentVolumes they back) and LVMS removes the volume group on its next pass",
			vg.Name, len(user), strings.Join(user, ", "))
		p.event(true, "ManualCleanupRequired", "volume group %s still holds %s; it is kept until they are gone", vg.Name, strings.Join(user, ", "))
		return
	}
	r := p.e.Runner
	for _, pool := range pools {
		if err := r.RemoveLV(ctx, vg.Name, pool); err != nil && !lvm.IsNotFound(err) {
			p.problem(PhaseFailed, "%v", err)
			return
		}
	}
	pvs := p.in.Report.PVsOf(vg.Name)
	if err := r.VGRemove(ctx, vg.Name); err != nil && !lvm.IsNotFound(err) {
		p.problem(PhaseFailed, "%v", err)
		return
	}
	var names []string
	for _, pv := range pvs {
		if !pv.Missing {
			names = append(names, pv.Name)
		}
	}
	if len(names) > 0 {
		if err := r.PVRemove(ctx, names...); err != nil {
			// The volume group is gone; leftover labels are orphan PVs that the next pass removes too.
			p.problem(PhaseFailed, "%v", err)
			return
		}
	}
	p.res.Changed = true
	p.res.Phase = PhaseDeleted
	p.event(false, "VolumeGroupDeleted", "deleted volume group %s and released %s", vg.Name, strings.Join(names, ", "))
}

// desiredPool reports whether the volume group's thin device classes name the pool.
func (p *vgPass) desiredPool(name string) bool {
	return slices.ContainsFunc(p.vg.ThinPools, func(tp desired.ThinPool) bool { return tp.Name == name })
}
