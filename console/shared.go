package console

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/console/explain"
)

// lunNotVisible is how the node agent's shared path (nodeagent/shared) says that a LUN of a shared volume
// group is missing on the node.
const lunNotVisible = "is not visible on this node"

// unhealthyTopic explains a volume group the agent reports not healthy; for a shared one that is not in its
// lockspace, why it is not.
func unhealthyTopic(a *actualVG) string {
	switch {
	case a.lockspace != string(lvmv2.LockspaceNotJoined):
		return explain.TopicVolumeGroupUnhealthy
	case strings.Contains(a.message, lunNotVisible):
		return explain.TopicSharedLUNMissing
	}
	return explain.TopicLockspaceNotJoined
}

// sharedLUNRow is the state of a LUN a shared volume group names: the agent lists no LUNs, so it is missing
// only when the agent says it is not visible (the volume group's explanation says so, once).
func sharedLUNRow(a *actualVG, path string) (DeviceState, Health, string) {
	if strings.Contains(a.message, lunNotVisible) && strings.Contains(a.message, path) {
		return DeviceMissing, HealthError, "not visible on this node"
	}
	return DeviceUnlisted, HealthInfo, "not listed: the agent does not list a shared volume group's LUNs"
}

// hostIDKey is a host ID within a namespace: the node agents of one namespace claim IDs through the Leases
// there, so only nodes of one namespace must not share one.
type hostIDKey struct {
	namespace string
	id        int32
}

// hostIDHolders returns, per namespace and host ID, the nodes whose LVMNode reports it.
func (x *index) hostIDHolders() map[hostIDKey][]string {
	x.hostIDsOnce.Do(x.buildHostIDs)
	return x.hostIDs
}

func (x *index) buildHostIDs() {
	x.hostIDs = map[hostIDKey][]string{}
	for i := range x.s.LVMNodes {
		n := &x.s.LVMNodes[i]
		if sl := n.Status.SharedLocking; sl != nil && sl.HostID > 0 {
			k := hostIDKey{n.Namespace, sl.HostID}
			if !slices.Contains(x.hostIDs[k], n.Name) {
				x.hostIDs[k] = append(x.hostIDs[k], n.Name)
			}
		}
	}
}

// sharedLocking is the view of an LVMNode's lock managers, with the other nodes that report its host ID.
func (x *index) sharedLocking(n *lvmv2.LVMNode) *SharedLockingView {
	sl := n.Status.SharedLocking
	v := &SharedLockingView{Mode: sl.Mode, HostID: sl.HostID, Watchdog: sl.Watchdog, Fencing: sl.Fencing, Message: sl.Message, Health: HealthOK}
	if sl.HostID > 0 {
		for _, other := range x.hostIDHolders()[hostIDKey{n.Namespace, sl.HostID}] {
			if other != n.Name {
				v.HostIDAlsoOn = append(v.HostIDAlsoOn, other)
			}
		}
		slices.Sort(v.HostIDAlsoOn)
	}
	return v
}

// lockManagersDown tells whether sanlock or lvmlockd does not run: the mode says so, or the agent gives a
// reason (it clears the reason once both run again).
func lockManagersDown(sl *SharedLockingView) bool {
	return sl.Mode == "NotRunning" || sl.Message != ""
}

// wantsShared tells whether the spec asks the node for a shared volume group.
func wantsShared(v *NodeView) bool {
	return slices.ContainsFunc(v.VolumeGroups, func(g VolumeGroupView) bool {
		return g.InSpec && strings.EqualFold(g.AccessPolicy, string(lvmv2.AccessPolicyShared))
	})
}

// lockingDifferences lists what is wrong with a node's lock managers: not running while the spec asks for a
// shared volume group, a host ID another node reports too, and sanlock without a watchdog (only known once
// it runs). The locking view keeps them as its findings, and its health is the worst of them.
func lockingDifferences(v *NodeView) []Difference {
	sl := v.SharedLocking
	if sl == nil {
		return nil
	}
	ctx := explain.Context{Node: v.Name}
	var out []Difference
	add := func(topic, detail, desired, actual string) {
		x := explain.Topic(topic, detail, ctx)
		d := Difference{Node: v.Name, Desired: desired, Actual: actual, Explanation: x, Health: healthOf(x.Severity)}
		sl.Health = worse(sl.Health, d.Health)
		out = append(out, d)
	}
	shared := wantsShared(v)
	if shared && lockManagersDown(sl) {
		actual := "lock managers " + sl.Mode
		if sl.Message != "" {
			actual += ": " + sl.Message
		}
		add(explain.TopicLockManagersNotRunning, "", "sanlock and lvmlockd running", actual)
	}
	if len(sl.HostIDAlsoOn) > 0 {
		also := strings.Join(sl.HostIDAlsoOn, ", ")
		add(explain.TopicHostIDConflict, fmt.Sprintf("Host ID %d is reported by %s too.", sl.HostID, also),
			fmt.Sprintf("host ID %d on this node only", sl.HostID), fmt.Sprintf("host ID %d also on %s", sl.HostID, also))
	}
	if shared && !sl.Watchdog && sl.Mode != "NotRunning" {
		add(explain.TopicNoWatchdog, "", "sanlock with a watchdog (fencing)", cmp.Or(sl.Fencing, "no watchdog"))
	}
	sl.Findings = out
	return out
}

// LockModeText says who runs a node's lock managers, for the web page and the TUI.
func LockModeText(mode string) string {
	switch mode {
	case "Host":
		return "run by the host"
	case "Agent":
		return "run by the node agent"
	case "NotRunning":
		return "not running"
	}
	return mode
}

// sharedLVKey is a volume of a shared volume group: the volume group and the LV's name (the volume ID).
type sharedLVKey struct {
	vg, name string
}

// activations returns, per shared volume, the nodes whose LVMNode reports it active, by node.
func (x *index) activations() map[sharedLVKey][]Activation {
	x.activeOnce.Do(x.buildActivations)
	return x.active
}

func (x *index) buildActivations() {
	x.active = map[sharedLVKey][]Activation{}
	for i := range x.s.LVMNodes {
		n := &x.s.LVMNodes[i]
		for _, g := range n.Status.VolumeGroups {
			for _, a := range g.ActiveVolumes {
				k := sharedLVKey{g.Name, a.Name}
				x.active[k] = append(x.active[k], Activation{Node: n.Name, Mode: string(a.Mode)})
			}
		}
	}
	for _, as := range x.active {
		slices.SortFunc(as, func(a, b Activation) int { return strings.Compare(a.Node, b.Node) })
	}
}

// sharedVolumeGroup is the volume group of a volume of the shared driver: it has no node and names its
// volume group in an annotation. Empty for any other volume.
func sharedVolumeGroup(lv *topolvmv1.LogicalVolume) string {
	if lv.Spec.NodeName != "" {
		return ""
	}
	return lv.Annotations[driver.SharedVolumeGroupAnnotation]
}

// activeVolumes are the volumes of a shared volume group that its node agent reports active, by name, with
// the LogicalVolume of each.
func (x *index) activeVolumes(s *lvmv2.VolumeGroupStatus) []ActiveVolume {
	if s == nil || len(s.ActiveVolumes) == 0 {
		return nil
	}
	out := make([]ActiveVolume, 0, len(s.ActiveVolumes))
	for _, a := range s.ActiveVolumes {
		out = append(out, ActiveVolume{Name: a.Name, Mode: string(a.Mode), LogicalVolume: x.sharedLVs[sharedLVKey{s.Name, a.Name}]})
	}
	slices.SortFunc(out, func(a, b ActiveVolume) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ActiveOnText says where a shared volume is active ("node-a (Shared), node-b (Shared)"), for the web page
// and the TUI.
func ActiveOnText(as []Activation) string {
	if len(as) == 0 {
		return "not active on any node"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Node + " (" + a.Mode + ")"
	}
	return strings.Join(parts, ", ")
}
