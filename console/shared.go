package console

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
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
	if x.hostIDs != nil {
		return x.hostIDs
	}
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
	return x.hostIDs
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
