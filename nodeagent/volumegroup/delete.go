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
	if p.blockedByVolumes(vg.Name, p.in.Report) {
		return
	}
	r := p.e.Runner
	// Volumes may have been created since this pass read the report: read it again under the lock that
	// lvmd holds while it creates one, and remove the pools and the volume group only if still empty.
	unlock, err := r.LockVG(ctx, vg.Name)
	if err != nil {
		p.problem(PhaseFailed, "%v", err)
		return
	}
	defer unlock()
	fresh, err := r.FullReport(ctx)
	if err != nil {
		p.problem(PhaseFailed, "read the volume group again before removing it: %v", err)
		return
	}
	if p.blockedByVolumes(vg.Name, fresh) {
		return
	}
	for _, pool := range p.poolsOf(vg.Name, fresh) {
		if err := r.RemoveLV(ctx, vg.Name, pool); err != nil && !lvm.IsNotFound(err) {
			p.problem(PhaseFailed, "%v", err)
			return
		}
	}
	pvs := fresh.PVsOf(vg.Name)
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

// poolsOf are the volume group's thin pools that LVMS made (tagged, or named by a thin device class).
func (p *vgPass) poolsOf(vg string, rep *lvm.Report) []string {
	var pools []string
	for _, lv := range rep.LVsOf(vg) {
		if lv.IsThinPool() && (slices.Contains(lv.Tags, lvm.OwnerTag) || p.desiredPool(lv.Name)) {
			pools = append(pools, lv.Name)
		}
	}
	return pools
}

// blockedByVolumes reports (and says why) when the volume group holds logical volumes other than LVMS's
// pools and their internal LVs: nobody's volume is removed with it.
func (p *vgPass) blockedByVolumes(vg string, rep *lvm.Report) bool {
	var user []string
	for _, lv := range rep.LVsOf(vg) {
		switch {
		case lv.IsPrivate() && !lv.IsThinPool():
			// pool data, metadata and spare go with their pool
		case slices.Contains(p.poolsOf(vg, rep), lv.Name):
		default:
			user = append(user, lv.Name)
		}
	}
	if len(user) == 0 {
		return false
	}
	slices.Sort(user)
	p.problem(PhaseManualCleanupRequired, "volume group %s is being deleted but still holds %d logical volume(s) LVMS did not create for itself (%s); delete them (or the PersistentVolumes they back) and LVMS removes the volume group on its next pass",
		vg, len(user), strings.Join(user, ", "))
	p.event(true, "ManualCleanupRequired", "volume group %s still holds %s; it is kept until they are gone", vg, strings.Join(user, ", "))
	return true
}

// desiredPool reports whether the volume group's thin device classes name the pool.
func (p *vgPass) desiredPool(name string) bool {
	return slices.ContainsFunc(p.vg.ThinPools, func(tp desired.ThinPool) bool { return tp.Name == name })
}
