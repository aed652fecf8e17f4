package volumegroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/filter"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// Usage levels that raise the thin pool alarm; the device class's usage thresholds replace the warning
// levels when set.
const (
	MetadataWarnPercent     = 75
	MetadataCriticalPercent = 95
	DataWarnPercent         = 90
)

// WipeRecords remembers forced wipes, durably, so that a device is never wiped twice (restarts and
// upgrades included). They fail closed: records that cannot be read mean "do not wipe".
type WipeRecords interface {
	// Wiped returns the record of a wipe of the device the selector names by path for a volume group, if
	// there is one. An error means the records cannot be read.
	Wiped(vg, path string) (WipeRecord, bool, error)
	// Begin records the intent to wipe, before the wipe: an agent that stops during the wipe never wipes
	// the device again.
	Begin(ctx context.Context, vg, path string, at time.Time) error
	// Record confirms a wipe. The engine uses a wiped device only after Record succeeded.
	Record(ctx context.Context, vg, path string, at time.Time) error
}

// WipeRecord is one device's wipe: when it began, and whether it was confirmed done.
type WipeRecord struct {
	At   time.Time
	Done bool
}

// Engine reconciles volume groups and thin pools.
type Engine struct {
	Runner lvm.Runner
	Wipes  WipeRecords
	// Shared sets up shared volume groups, which this engine does not; nil leaves them Progressing.
	Shared SharedVolumeGroups
	// Clock tells the time (default the real clock; tests pass a fake).
	Clock clock.PassiveClock
}

// SharedVolumeGroups takes the next step of a shared volume group on this node (nodeagent/shared): its
// phase and a sentence on where it stands.
type SharedVolumeGroups interface {
	Step(ctx context.Context, vg *desired.VolumeGroup, inv *blockdev.Inventory) (Phase, string)
}

// Input is one pass's view of the node.
type Input struct {
	Node         *desired.Node
	Inventory    *blockdev.Inventory
	Report       *lvm.Report
	Capabilities lvm.Capabilities
	// Scoped: the runner uses its own LVM devices file.
	Scoped bool
	// MinSize overrides the filters' minimum device size.
	MinSize uint64
	// ReferencedBy maps devices (kernel names) that PersistentVolumes use directly (local volumes, VM
	// disks) to such a PersistentVolume's name: they are never wiped or taken.
	ReferencedBy map[string]string
}

// Phase is a volume group's state after a pass.
type Phase string

// Phases, mapped onto the API's states by the status package.
const (
	PhaseHealthy               Phase = "Healthy"
	PhaseProgressing           Phase = "Progressing"
	PhaseDegraded              Phase = "Degraded"
	PhaseFailed                Phase = "Failed"
	PhaseDeleted               Phase = "Deleted"
	PhaseManualCleanupRequired Phase = "ManualCleanupRequired"
)

// Event is something worth a Kubernetes event on the volume group's object.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Result is one volume group after a pass.
type Result struct {
	Name  string
	Phase Phase
	// Message explains a phase other than Healthy, one sentence per problem.
	Message string
	// Filter is the device verdict of the pass.
	Filter filter.Result
	// Wiped maps a device kname to when it was wiped (for status).
	Wiped map[string]time.Time
	// Pools of the volume group's thin device classes, in name order.
	Pools []Pool
	// Events of this pass.
	Events []Event
	// Changed is true when the pass changed something on disk.
	Changed bool
}

// Pool is a thin pool's state.
type Pool struct {
	Name string
	// LV is the pool as LVM reports it after the pass (nil when it does not exist).
	LV *lvm.LV
	// Problem explains why the pool is missing or unhealthy.
	Problem string
	// Alarm is set when the pool's data or metadata usage is high.
	Alarm string
	// DataUsageThreshold and MetadataUsageThreshold are the device class's (percent), for status.
	DataUsageThreshold, MetadataUsageThreshold int
}

// Outcome is the result of a pass for every desired volume group, in desired order.
type Outcome struct {
	VolumeGroups []Result
	// Changed is true when any volume group changed on disk: discover again before reporting.
	Changed bool
}

// Reconcile runs one pass: filters, then per volume group: wipe, create or extend, remove dropped devices,
// thin pools, or deletion. Commands that fail are reported in the result of their volume group; the pass
// goes on with the next one.
func (e *Engine) Reconcile(ctx context.Context, in Input) Outcome {
	var fvgs []filter.VolumeGroup
	for _, vg := range in.Node.VolumeGroups {
		if vg.Selector != nil && !vg.Shared {
			fvgs = append(fvgs, filter.VolumeGroup{Name: vg.Name, Selector: vg.Selector, StaticDiscovery: vg.StaticDiscovery})
		}
	}
	results := filter.Run(filter.Input{Inventory: in.Inventory, Report: in.Report, Scoped: in.Scoped, VolumeGroups: fvgs, MinSize: in.MinSize,
		ReferencedBy: in.ReferencedBy})
	byName := map[string]filter.Result{}
	for _, r := range results {
		byName[r.Name] = r
	}
	var out Outcome
	for i := range in.Node.VolumeGroups {
		vg := &in.Node.VolumeGroups[i]
		r := e.volumeGroup(ctx, in, vg, byName[vg.Name])
		out.Changed = out.Changed || r.Changed
		out.VolumeGroups = append(out.VolumeGroups, r)
	}
	return out
}

func (e *Engine) now() time.Time {
	if e.Clock == nil {
		return time.Now()
	}
	return e.Clock.Now()
}

// vgPass is the work on one volume group.
type vgPass struct {
	e    *Engine
	in   Input
	vg   *desired.VolumeGroup
	res  Result
	msgs []string
}

func (p *vgPass) problem(phase Phase, format string, args ...any) {
	p.msgs = append(p.msgs, fmt.Sprintf(format, args...))
	if rank(phase) > rank(p.res.Phase) {
		p.res.Phase = phase
	}
}

func (p *vgPass) event(warning bool, reason, format string, args ...any) {
	p.res.Events = append(p.res.Events, Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func rank(p Phase) int {
	return slices.Index([]Phase{PhaseHealthy, PhaseProgressing, PhaseDegraded, PhaseManualCleanupRequired, PhaseFailed}, p)
}

func (e *Engine) volumeGroup(ctx context.Context, in Input, vg *desired.VolumeGroup, fr filter.Result) Result {
	p := &vgPass{e: e, in: in, vg: vg, res: Result{Name: vg.Name, Phase: PhaseHealthy, Filter: fr, Wiped: map[string]time.Time{}}}
	p.run(ctx)
	p.res.Message = strings.Join(p.msgs, "; ")
	return p.res
}

func (p *vgPass) run(ctx context.Context) {
	vg := p.vg
	lvmVG, exists := p.in.Report.VG(vg.Name)
	switch {
	case vg.SelectorError != "":
		p.problem(PhaseFailed, "%s", vg.SelectorError)
		return
	case vg.Shared && p.e.Shared == nil:
		p.problem(PhaseProgressing, "volume group %s is shared (accessPolicy Shared); this agent does not set up shared volume groups", vg.Name)
		return
	case vg.Shared:
		phase, msg := p.e.Shared.Step(ctx, vg, p.in.Inventory)
		switch phase {
		case PhaseHealthy:
		case PhaseDeleted:
			p.res.Phase, p.msgs = PhaseDeleted, append(p.msgs, msg)
		default:
			p.problem(phase, "%s", msg)
		}
		return
	case exists && !lvmVG.HasTag(lvm.OwnerTag):
		p.problem(PhaseFailed, "volume group %s exists on this node but LVMS did not create it (it has no %q tag), so LVMS does not touch it; rename one of them, or hand it to LVMS with `vgchange --addtag %s %s`",
			vg.Name, lvm.OwnerTag, lvm.OwnerTag, vg.Name)
		return
	case vg.Deleting:
		p.delete(ctx, lvmVG, exists)
		return
	}
	p.recordWipes()
	if p.wipe(ctx) {
		return // discover again before using the wiped devices
	}
	if len(p.res.Filter.MissingRequired) > 0 {
		phase := PhaseFailed
		if exists {
			phase = PhaseDegraded
		}
		p.problem(phase, "required device %s was not found on this node; attach it or remove it from paths", strings.Join(p.res.Filter.MissingRequired, ", "))
		if !exists {
			return
		}
	}
	if p.res.Filter.NoOptionalFound && !exists {
		p.problem(PhaseFailed, "none of the optionalPaths exists on this node; at least one must")
		return
	}
	if !p.addDevices(ctx, exists) {
		return
	}
	if exists {
		p.removeDevices(ctx, lvmVG)
	}
	if p.res.Changed {
		// The pools are sized from the volume group as LVM reports it: the next pass sees it.
		p.problem(PhaseProgressing, "volume group %s changed; checking it again", vg.Name)
		return
	}
	p.thinPools(ctx, lvmVG)
}

// recordWipes shows earlier wipes of the volume group's members in the result.
func (p *vgPass) recordWipes() {
	if p.e.Wipes == nil {
		return
	}
	for _, c := range append(slices.Clone(p.res.Filter.Members), p.res.Filter.New...) {
		path := c.Match.Path
		if path == "" {
			path = c.KName()
		}
		if rec, ok, err := p.e.Wipes.Wiped(p.vg.Name, path); err == nil && ok {
			p.res.Wiped[c.KName()] = rec.At
		}
	}
}

// addDevices creates the volume group or extends it with new devices. It returns false when the volume
// group does not exist (yet).
func (p *vgPass) addDevices(ctx context.Context, exists bool) bool {
	var fresh, all []string
	for _, c := range p.res.Filter.New {
		name := c.Device.KName
		if c.Orphan {
			name = c.PVName
		} else {
			fresh = append(fresh, name)
		}
		all = append(all, name)
	}
	if len(all) == 0 {
		if !exists {
			p.problem(PhaseFailed, "there is no available device to create volume group %s; see the excluded devices for why each candidate cannot be used", p.vg.Name)
		}
		return exists
	}
	r := p.e.Runner
	// pvcreate first, then vgcreate/vgextend: a pass interrupted in between leaves orphan physical volumes,
	// which the next pass finds (orphan PVs in this agent's scope) and uses.
	if len(fresh) > 0 {
		if err := r.PVCreate(ctx, fresh...); err != nil {
			p.problem(PhaseFailed, "%v", err)
			p.event(true, "VolumeGroupCreateFailed", "%v", err)
			return exists
		}
		p.res.Changed = true
	}
	if !exists {
		if err := r.VGCreate(ctx, p.vg.Name, []string{lvm.OwnerTag}, all); err != nil {
			p.problem(PhaseFailed, "%v", err)
			p.event(true, "VolumeGroupCreateFailed", "%v", err)
			return false
		}
		p.res.Changed = true
		p.event(false, "VolumeGroupCreated", "created volume group %s on %s", p.vg.Name, strings.Join(all, ", "))
		return true
	}
	if err := r.VGExtend(ctx, p.vg.Name, all); err != nil {
		p.problem(PhaseDegraded, "%v", err)
		p.event(true, "VolumeGroupExtendFailed", "%v", err)
		return true
	}
	p.res.Changed = true
	p.event(false, "VolumeGroupExtended", "added %s to volume group %s", strings.Join(all, ", "), p.vg.Name)
	return true
}

// removeDevices takes physical volumes the selector no longer picks out of the volume group, but only
// empty ones: LVMS does not move data (pvmove).
func (p *vgPass) removeDevices(ctx context.Context, vg lvm.VG) {
	members := p.res.Filter.Members
	remaining := len(members)
	for _, c := range members {
		if c.Selected || c.Device == nil {
			continue
		}
		pv, ok := p.in.Report.PV(c.PVName)
		if !ok {
			continue
		}
		switch {
		case pv.Used > 0:
			p.problem(PhaseDegraded, "%s is no longer selected but still holds %s of data in volume group %s; LVMS does not move data: move it off with `pvmove %s` and LVMS removes the device on its next pass, or select the device again",
				pv.Name, humanBytes(pv.Used), vg.Name, pv.Name)
			p.event(true, "DeviceRemovalRefused", "%s holds data in %s and was not removed", pv.Name, vg.Name)
		case remaining <= 1:
			p.problem(PhaseDegraded, "%s is no longer selected but is the last device of volume group %s; LVMS keeps it (delete the volume group to release it)", pv.Name, vg.Name)
		default:
			if err := p.e.Runner.VGReduce(ctx, vg.Name, pv.Name); err != nil {
				p.problem(PhaseDegraded, "%v", err)
				p.event(true, "DeviceRemovalFailed", "%v", err)
				continue
			}
			if err := p.e.Runner.PVRemove(ctx, pv.Name); err != nil {
				p.problem(PhaseDegraded, "%v", err)
			}
			remaining--
			p.res.Changed = true
			p.event(false, "DeviceRemoved", "removed %s from volume group %s", pv.Name, vg.Name)
		}
	}
}

func humanBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", v), "0"), ".") + " " + units[i]
}

// reasonCodes lists an exclusion's codes.
func reasonCodes(e filter.Excluded) []lvmv2.ReasonCode {
	out := make([]lvmv2.ReasonCode, len(e.Reasons))
	for i, r := range e.Reasons {
		out[i] = r.Code
	}
	return out
}
