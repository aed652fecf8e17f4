package status

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/volumegroup"
)

// LVMD is the state of lvmd.yaml, as the agent found or wrote it.
type LVMD struct {
	OK      bool
	Reason  string
	Message string
}

// External is the host's lvmd.yaml in ExternalConfiguration mode.
type External struct {
	// Config is nil when the file is missing or invalid (see LVMD).
	Config *lvmd.Config
	// Problems are device classes whose volume group or thin pool is missing.
	Problems []string
}

// Inputs is everything a status is built from.
type Inputs struct {
	Node         *desired.Node
	Outcome      volumegroup.Outcome
	Observation  volumegroup.Observation
	Capabilities lvm.Capabilities
	LVMD         LVMD
	// External is set in ExternalConfiguration mode.
	External *External
	// Shared is the shared volume groups' part (nil when the node has none).
	Shared *Shared
	Now    metav1.Time
}

// Shared is what the shared path reports: the lock managers, and per shared volume group whether the node
// is in its lockspace and who created it.
type Shared struct {
	Locking      *lvmv2.SharedLockingStatus
	VolumeGroups map[string]SharedVolumeGroup
}

// SharedVolumeGroup is one shared volume group on this node.
type SharedVolumeGroup struct {
	Joined        bool
	InitializedBy string
	// Active are its volumes active on this node.
	Active []lvmv2.SharedActiveVolume
	// Size and Free as read with the lock managers (0 before the node joined).
	Size, Free uint64
}

// vgView is one volume group's status, shared by the v1 and v2 builders.
type vgView struct {
	desired *desired.VolumeGroup
	result  volumegroup.Result
	state   lvmv2.State
	deleted bool
}

type classView struct {
	desired desired.DeviceClass
	state   lvmv2.State
	reason  string
	message string
}

func phaseState(p volumegroup.Phase) lvmv2.State {
	switch p {
	case volumegroup.PhaseHealthy:
		return lvmv2.StateHealthy
	case volumegroup.PhaseProgressing:
		return lvmv2.StateProgressing
	case volumegroup.PhaseDegraded:
		return lvmv2.StateDegraded
	case volumegroup.PhaseManualCleanupRequired:
		return lvmv2.StateDeleting
	}
	return lvmv2.StateFailed
}

func (in Inputs) volumeGroups(src desired.Source) []vgView {
	var out []vgView
	for i := range in.Node.VolumeGroups {
		vg := &in.Node.VolumeGroups[i]
		if vg.Source != src || i >= len(in.Outcome.VolumeGroups) {
			continue
		}
		r := in.Outcome.VolumeGroups[i]
		out = append(out, vgView{desired: vg, result: r, state: phaseState(r.Phase), deleted: r.Phase == volumegroup.PhaseDeleted})
	}
	return out
}

func (in Inputs) result(vg string) (volumegroup.Result, bool) {
	for i, d := range in.Node.VolumeGroups {
		if d.Name == vg && i < len(in.Outcome.VolumeGroups) {
			return in.Outcome.VolumeGroups[i], true
		}
	}
	return volumegroup.Result{}, false
}

func (in Inputs) deviceClasses(src desired.Source) []classView {
	var out []classView
	for _, dc := range in.Node.DeviceClasses {
		if dc.Source != src {
			continue
		}
		out = append(out, in.classState(dc))
	}
	return out
}

func (in Inputs) classState(dc desired.DeviceClass) classView {
	v := classView{desired: dc, state: lvmv2.StateHealthy}
	r, ok := in.result(dc.VolumeGroup)
	switch {
	case !ok:
		v.state, v.reason, v.message = lvmv2.StateFailed, ReasonVolumeGroupNotReady, fmt.Sprintf("device class %s uses volume group %s, which is not desired on this node", dc.Name, dc.VolumeGroup)
		return v
	case r.Phase == volumegroup.PhaseFailed || r.Phase == volumegroup.PhaseProgressing || r.Phase == volumegroup.PhaseDeleted:
		state := lvmv2.StateProgressing
		if r.Phase == volumegroup.PhaseFailed {
			state = lvmv2.StateFailed
		}
		if _, exists := in.Observation.Report.VG(dc.VolumeGroup); !exists || r.Phase != volumegroup.PhaseFailed {
			v.state, v.reason, v.message = state, ReasonVolumeGroupNotReady, fmt.Sprintf("device class %s waits for volume group %s: %s", dc.Name, dc.VolumeGroup, r.Message)
			return v
		}
	}
	if missing := in.Capabilities.Missing(dc.Needs...); len(missing) > 0 {
		why := in.Capabilities.Reason
		if why == "" {
			var mods []string
			for _, t := range missing {
				if m := lvm.ModuleFor(t); m != "" && !slices.Contains(mods, m) {
					mods = append(mods, m)
				}
			}
			why = fmt.Sprintf("the kernel does not provide the device-mapper %s target (load %s)", strings.Join(missing, ", "), strings.Join(mods, ", "))
		}
		v.state, v.reason, v.message = lvmv2.StateDegraded, ReasonKernelTargetMissing, fmt.Sprintf("device class %s cannot provision volumes: %s", dc.Name, why)
		return v
	}
	if dc.Thin != nil {
		for _, p := range r.Pools {
			if p.Name != dc.Thin.Name {
				continue
			}
			switch {
			case p.LV == nil || p.Problem != "":
				v.state, v.reason, v.message = lvmv2.StateDegraded, ReasonThinPoolNotReady, fmt.Sprintf("device class %s: %s", dc.Name, p.Problem)
			case p.Alarm != "":
				v.state, v.reason, v.message = lvmv2.StateDegraded, ReasonThinPoolNotReady, fmt.Sprintf("device class %s: %s", dc.Name, p.Alarm)
			}
			return v
		}
		v.state, v.reason, v.message = lvmv2.StateProgressing, ReasonThinPoolNotReady, fmt.Sprintf("device class %s waits for thin pool %s/%s", dc.Name, dc.VolumeGroup, dc.Thin.Name)
	}
	return v
}

// volumeGroupsCondition summarises volume groups.
func volumeGroupsCondition(vgs []vgView, external bool, gen int64) metav1.Condition {
	c := metav1.Condition{Type: lvmv2.ConditionVolumeGroupsHealthy, ObservedGeneration: gen}
	var msgs []string
	worst := lvmv2.StateHealthy
	for _, v := range vgs {
		if v.deleted || v.state == lvmv2.StateHealthy {
			continue
		}
		msgs = append(msgs, v.result.Message)
		if stateRank(v.state) > stateRank(worst) {
			worst = v.state
		}
	}
	switch {
	case external:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonExternalConfiguration, "volume groups are managed outside LVMS (configurationPolicy: ExternalConfiguration)"
	case len(vgs) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonNoVolumeGroups, "no volume group is desired on this node"
	case len(msgs) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAllHealthy, "every volume group is healthy"
	default:
		c.Status, c.Message = metav1.ConditionFalse, strings.Join(msgs, "; ")
		c.Reason = map[lvmv2.State]string{lvmv2.StateProgressing: ReasonProgressing, lvmv2.StateDegraded: ReasonDegraded,
			lvmv2.StateDeleting: ReasonManualCleanupRequired, lvmv2.StateFailed: ReasonFailed}[worst]
	}
	return c
}

func deviceClassesCondition(classes []classView, gen int64) metav1.Condition {
	c := metav1.Condition{Type: lvmv2.ConditionDeviceClassesHealthy, ObservedGeneration: gen}
	var msgs []string
	reason := ""
	for _, v := range classes {
		if v.state == lvmv2.StateHealthy {
			continue
		}
		msgs = append(msgs, v.message)
		if reason == "" {
			reason = v.reason
		}
	}
	switch {
	case len(classes) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonNoDeviceClasses, "no device class is desired on this node"
	case len(msgs) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAllHealthy, "every device class is healthy"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, strings.Join(msgs, "; ")
	}
	return c
}

func lvmdCondition(l LVMD, gen int64) metav1.Condition {
	return metav1.Condition{Type: lvmv2.ConditionLVMDConfigured, Status: boolStatus(l.OK), Reason: l.Reason, Message: l.Message, ObservedGeneration: gen}
}

func stateRank(s lvmv2.State) int {
	return slices.Index([]lvmv2.State{lvmv2.StateHealthy, lvmv2.StateProgressing, lvmv2.StateDegraded, lvmv2.StateDeleting, lvmv2.StateFailed}, s)
}

// quantity renders bytes as a binary quantity.
func quantity(n uint64) *resource.Quantity {
	return resource.NewQuantity(int64(min(n, 1<<62)), resource.BinarySI)
}

// percent renders an lvm2 percentage with one decimal ("30.0"); empty stays empty.
func percent(s string) string {
	f, err := lvm.ParsePercent(s)
	if err != nil || s == "" {
		return s
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}
