package status

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/desired"
)

// LVMNode builds LVMNode.status from the previous status and what the agent observed. It keeps what the
// operator writes (StorageClass and VolumeSnapshotClass states, the StorageClassesHealthy condition).
func LVMNode(prev lvmv2.LVMNodeStatus, in Inputs) lvmv2.LVMNodeStatus {
	gen := in.Node.Generation
	out := lvmv2.LVMNodeStatus{ObservedGeneration: gen, Conditions: slices.Clone(prev.Conditions)}
	vgs := in.volumeGroups(desired.SourceLVMNode)
	for _, v := range vgs {
		if v.deleted {
			continue
		}
		out.VolumeGroups = append(out.VolumeGroups, in.v2VolumeGroup(v))
	}
	classes := in.deviceClasses(desired.SourceLVMNode)
	for _, c := range classes {
		dc := lvmv2.DeviceClassStatus{Name: c.desired.Name, VolumeGroup: c.desired.VolumeGroup, State: c.state, Message: c.message}
		for _, p := range prev.DeviceClasses {
			if p.Name == dc.Name {
				dc.StorageClass, dc.SnapshotClass = p.StorageClass, p.SnapshotClass
			}
		}
		out.DeviceClasses = append(out.DeviceClasses, dc)
	}
	for _, c := range []metav1.Condition{
		volumeGroupsCondition(vgs, in.Node.External, gen),
		deviceClassesCondition(classes, gen),
		lvmdCondition(in.LVMD, gen),
	} {
		out.Conditions = SetCondition(out.Conditions, c, in.Now)
	}
	out.State, out.Message = nodeState(out.Conditions)
	if in.Shared != nil {
		out.SharedLocking = in.Shared.Locking.DeepCopy()
	}
	return out
}

// nodeState summarises the node from the agent's conditions: Failed when a volume group failed,
// Progressing while one is being set up, Degraded for any other false condition, else Ready.
func nodeState(conds []metav1.Condition) (lvmv2.State, string) {
	state, msg := lvmv2.StateReady, ""
	for _, typ := range []string{lvmv2.ConditionVolumeGroupsHealthy, lvmv2.ConditionDeviceClassesHealthy, lvmv2.ConditionLVMDConfigured} {
		c, ok := FindCondition(conds, typ)
		if !ok || c.Status == metav1.ConditionTrue {
			continue
		}
		s := lvmv2.StateDegraded
		switch c.Reason {
		case ReasonFailed, ReasonInvalid, ReasonMissing, ReasonWriteFailed:
			s = lvmv2.StateFailed
		case ReasonProgressing, ReasonThinPoolNotReady, ReasonVolumeGroupNotReady, ReasonPartial:
			s = lvmv2.StateProgressing
		}
		if rank(s) > rank(state) {
			state, msg = s, c.Message
		}
	}
	return state, msg
}

func rank(s lvmv2.State) int {
	return slices.Index([]lvmv2.State{lvmv2.StateReady, lvmv2.StateProgressing, lvmv2.StateDegraded, lvmv2.StateFailed}, s)
}

func (in Inputs) v2VolumeGroup(v vgView) lvmv2.VolumeGroupStatus {
	r := v.result
	out := lvmv2.VolumeGroupStatus{Name: v.desired.Name, State: v.state, Message: r.Message}
	if sh, ok := in.sharedVG(v.desired); ok {
		out.Lockspace, out.InitializedBy, out.ActiveVolumes = lvmv2.LockspaceNotJoined, sh.InitializedBy, sh.Active
		if sh.Joined {
			out.Lockspace = lvmv2.LockspaceJoined
		}
	}
	if v.state == lvmv2.StateHealthy {
		out.Message = ""
	}
	if vg, ok := in.Observation.Report.VG(v.desired.Name); ok {
		out.Size, out.Free = quantity(vg.Size), quantity(vg.Free)
	} else if sh, ok := in.sharedVG(v.desired); ok && sh.Size > 0 {
		out.Size, out.Free = quantity(sh.Size), quantity(sh.Free)
	}
	for _, c := range append(slices.Clone(r.Filter.Members), r.Filter.New...) {
		d := lvmv2.Device{KName: c.KName(), Path: c.Match.Path, SelectorTerm: int32(c.Match.Term)}
		if c.Device != nil {
			d.Size, d.Links = quantity(c.Device.Size), StableLinks(c.Device.Links)
		}
		if at, ok := r.Wiped[c.KName()]; ok {
			t := metav1.NewTime(at.UTC())
			d.Wiped = &t
		}
		out.Devices.Included = append(out.Devices.Included, d)
	}
	slices.SortFunc(out.Devices.Included, func(a, b lvmv2.Device) int {
		switch {
		case a.KName < b.KName:
			return -1
		case a.KName > b.KName:
			return 1
		}
		return 0
	})
	for _, e := range r.Filter.Excluded {
		x := lvmv2.ExcludedDevice{KName: e.KName, Reasons: e.Messages(), ReasonCodes: e.Codes()}
		if e.Match != nil {
			x.Path = e.Match.Path
		}
		if inv := in.Observation.Inventory; inv != nil {
			if dev, ok := inv.Get(e.KName); ok {
				x.Links, x.Size = StableLinks(dev.Links), quantity(dev.Size)
			}
		}
		out.Devices.Excluded = append(out.Devices.Excluded, x)
	}
	for _, p := range r.Pools {
		if p.LV == nil {
			continue
		}
		out.Volumes = append(out.Volumes, lvmv2.LogicalVolumeStatus{Name: p.Name, Size: quantity(p.LV.Size),
			DataPercent: percent(p.LV.DataPercent), MetadataPercent: percent(p.LV.MetadataPercent), Attributes: p.LV.Attr,
			DataUsageThreshold: int32(p.DataUsageThreshold), MetadataUsageThreshold: int32(p.MetadataUsageThreshold)})
	}
	return out
}

// StableLinks keeps the names of a device that survive reboots and re-enumeration: /dev/disk/by-id (WWN,
// serial) and /dev/disk/by-path links.
func StableLinks(links []string) []string {
	var out []string
	for _, l := range links {
		if strings.HasPrefix(l, "/dev/disk/by-id/") || strings.HasPrefix(l, "/dev/disk/by-path/") {
			out = append(out, l)
		}
	}
	return out
}

// sharedVG is the shared path's report of a shared volume group.
func (in Inputs) sharedVG(vg *desired.VolumeGroup) (SharedVolumeGroup, bool) {
	if !vg.Shared || in.Shared == nil {
		return SharedVolumeGroup{}, false
	}
	sh, ok := in.Shared.VolumeGroups[vg.Name]
	return sh, ok
}
