package status

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/desired"
)

// NodeStatus builds LVMVolumeGroupNodeStatus in LVMS's shape: spec.nodeStatus lists the v1 volume groups
// (by name), status carries the conditions. generation is the object's metadata.generation after the spec
// is written; prev are its current conditions.
func NodeStatus(prev []metav1.Condition, generation int64, in Inputs) (lvmv1.LVMVolumeGroupNodeStatusSpec, lvmv1.LVMVolumeGroupNodeStatusStatus) {
	var spec lvmv1.LVMVolumeGroupNodeStatusSpec
	vgs := in.volumeGroups(desired.SourceLVMVolumeGroup)
	for _, v := range vgs {
		if v.deleted {
			continue
		}
		spec.LVMVGStatus = append(spec.LVMVGStatus, in.v1VolumeGroup(v))
	}
	if in.External != nil && in.External.Config != nil {
		spec.LVMVGStatus = append(spec.LVMVGStatus, in.externalVolumeGroups()...)
	}
	slices.SortStableFunc(spec.LVMVGStatus, func(a, b lvmv1.VGStatus) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	st := lvmv1.LVMVolumeGroupNodeStatusStatus{ObservedGeneration: generation, Conditions: slices.Clone(prev)}
	for _, c := range []metav1.Condition{
		volumeGroupsCondition(vgs, in.Node.External, generation),
		in.v1DeviceClassesCondition(generation),
		lvmdCondition(in.LVMD, generation),
	} {
		st.Conditions = SetCondition(st.Conditions, c, in.Now)
	}
	return spec, st
}

func (in Inputs) v1DeviceClassesCondition(gen int64) metav1.Condition {
	if in.External == nil {
		return deviceClassesCondition(in.deviceClasses(desired.SourceLVMVolumeGroup), gen)
	}
	c := metav1.Condition{Type: lvmv2.ConditionDeviceClassesHealthy, ObservedGeneration: gen}
	switch {
	case in.External.Config == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonInvalid, "the host lvmd.yaml cannot be used: "+in.LVMD.Message
	case len(in.External.Problems) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonVolumeGroupNotReady, joinSentences(in.External.Problems)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAllHealthy, "every device class of the host lvmd.yaml has its volume group"
	}
	return c
}

func joinSentences(s []string) string {
	out := ""
	for i, m := range s {
		if i > 0 {
			out += "; "
		}
		out += m
	}
	return out
}

func v1State(s lvmv2.State) lvmv1.VGStatusType {
	switch s {
	case lvmv2.StateHealthy:
		return lvmv1.VGStatusReady
	case lvmv2.StateProgressing:
		return lvmv1.VGStatusProgressing
	case lvmv2.StateDegraded, lvmv2.StateDeleting:
		return lvmv1.VGStatusDegraded
	}
	return lvmv1.VGStatusFailed
}

// v1VolumeGroup is a v1 volume group's entry. v1alpha1 has no per-class status: an LVMVolumeGroup is one
// device class on one volume group, so its entry carries the worse of the two states (a healthy volume
// group whose class cannot provision, for want of a kernel target or its thin pool, is not Ready), and the
// LVMCluster, kubectl and the console then say the same as the DeviceClassesHealthy condition.
func (in Inputs) v1VolumeGroup(v vgView) lvmv1.VGStatus {
	r := v.result
	state, reason := v.state, r.Message
	for _, c := range in.deviceClasses(desired.SourceLVMVolumeGroup) {
		if c.desired.VolumeGroup == v.desired.Name && stateRank(c.state) > stateRank(state) {
			state, reason = c.state, c.message
		}
	}
	out := lvmv1.VGStatus{Name: v.desired.Name, Status: v1State(state), DeviceDiscoveryPolicy: v.desired.DiscoveryPolicy}
	if state != lvmv2.StateHealthy {
		out.Reason = reason
	}
	for _, pv := range in.Observation.Report.PVsOf(v.desired.Name) {
		out.Devices = append(out.Devices, pv.Name)
	}
	for _, e := range r.Filter.Excluded {
		out.Excluded = append(out.Excluded, lvmv1.ExcludedDevice{Name: e.KName, Reasons: e.Messages(), ReasonCodes: e.Codes()})
	}
	return out
}

// externalVolumeGroups reports the volume groups of the host's lvmd.yaml.
func (in Inputs) externalVolumeGroups() []lvmv1.VGStatus {
	var out []lvmv1.VGStatus
	seen := map[string]bool{}
	for _, dc := range in.External.Config.DeviceClasses {
		if seen[dc.VolumeGroup] {
			continue
		}
		seen[dc.VolumeGroup] = true
		s := lvmv1.VGStatus{Name: dc.VolumeGroup, Status: lvmv1.VGStatusReady, DeviceDiscoveryPolicy: lvmv1.DeviceDiscoveryPolicyPreconfigured}
		if _, ok := in.Observation.Report.VG(dc.VolumeGroup); !ok {
			s.Status, s.Reason = lvmv1.VGStatusFailed, fmt.Sprintf("volume group %s named by the host lvmd.yaml does not exist on this node; create it or fix lvmd.yaml", dc.VolumeGroup)
		}
		for _, pv := range in.Observation.Report.PVsOf(dc.VolumeGroup) {
			s.Devices = append(s.Devices, pv.Name)
		}
		out = append(out, s)
	}
	return out
}

// NodeFacts are the facts of the v1 volume groups that LVMS's status shape has no field for: each device's
// stable links and each volume group's size (written as lvmv1.NodeFactsAnnotation).
func NodeFacts(in Inputs) lvmv1.NodeFacts {
	f := lvmv1.NodeFacts{Devices: map[string][]string{}, VolumeGroups: map[string]lvmv1.VolumeGroupFacts{}}
	links := func(kname string) {
		if inv := in.Observation.Inventory; inv != nil {
			if dev, ok := inv.Get(kname); ok {
				if l := StableLinks(dev.Links); len(l) > 0 {
					f.Devices[kname] = l
				}
			}
		}
	}
	for _, v := range in.volumeGroups(desired.SourceLVMVolumeGroup) {
		if v.deleted {
			continue
		}
		name := v.desired.Name
		if vg, ok := in.Observation.Report.VG(name); ok {
			f.VolumeGroups[name] = lvmv1.VolumeGroupFacts{Size: quantity(vg.Size), Free: quantity(vg.Free)}
		}
		for _, pv := range in.Observation.Report.PVsOf(name) {
			links(pv.Name)
		}
		for _, e := range v.result.Filter.Excluded {
			links(e.KName)
		}
	}
	return f
}
