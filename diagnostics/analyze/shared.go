package analyze

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/explain"
)

// lockingFinding returns a node's lock-manager difference of the given topic (console.lockingDifferences).
func lockingFinding(v *console.NodeView, topic string) (console.Difference, bool) {
	if v == nil || v.SharedLocking == nil {
		return console.Difference{}, false
	}
	i := slices.IndexFunc(v.SharedLocking.Findings, func(d console.Difference) bool { return d.Explanation.Code == topic })
	if i < 0 {
		return console.Difference{}, false
	}
	return v.SharedLocking.Findings[i], true
}

// checkLockManagers reports nodes with a shared volume group whose sanlock or lvmlockd does not run.
func checkLockManagers(in *input) []Finding {
	var out []Finding
	for _, name := range in.names {
		v := in.views[name]
		d, ok := lockingFinding(v, explain.TopicLockManagersNotRunning)
		if !ok {
			continue
		}
		sl := v.SharedLocking
		why := "the agent gives no reason"
		if sl.Message != "" {
			why = "the agent says " + strconv.Quote(sl.Message)
		}
		f := fromExplanation(d.Explanation, fmt.Sprintf("The lock managers (sanlock, lvmlockd) do not run on node %s (mode %s), which has a shared "+
			"volume group: %s. Until they run, the node can neither create nor join a shared volume group.", name, sl.Mode, why))
		f.Node, f.InvolvedObject, f.Codes = name, nodeObject(v), []string{d.Explanation.Code}
		out = append(out, f)
	}
	return out
}

// checkLockspace reports desired shared volume groups a node is not in the lockspace of: a failure when the
// agent cannot go on by itself, a warning while it is still on its way. A missing LUN (checkSharedLUN) and
// lock managers that do not run (checkLockManagers) are reported as the cause instead.
func checkLockspace(in *input) []Finding {
	var out []Finding
	in.eachVG(func(node string, v *console.NodeView, g *console.VolumeGroupView) {
		// A volume group the spec no longer has is left on purpose.
		if !g.InSpec || g.Lockspace != string(lvmv2.LockspaceNotJoined) || (g.Topic != nil && g.Topic.Code == explain.TopicSharedLUNMissing) {
			return
		}
		failed := g.State == string(lvmv2.StateFailed)
		if _, down := lockingFinding(v, explain.TopicLockManagersNotRunning); down && !failed {
			return
		}
		detail := ""
		if g.Message != "" {
			detail = "The agent says: \"" + g.Message + "\"."
		}
		x := explain.Topic(explain.TopicLockspaceNotJoined, detail, explain.Context{Node: node, VolumeGroup: g.Name})
		msg := fmt.Sprintf("Node %s is not in the lockspace of shared volume group %s (%s), so no volume of it can be used there", node, g.Name, g.State)
		if g.Message != "" {
			msg += ": the agent says " + strconv.Quote(g.Message)
		}
		f := fromExplanation(x, msg+".")
		if !failed {
			f.Severity = Warn
			f.Message += " The agent retries by itself; this needs attention only if it stays so."
		}
		f.Node, f.VolumeGroup, f.InvolvedObject, f.Codes = node, g.Name, refObject(g.Source), []string{x.Code}
		out = append(out, f)
	})
	return out
}

// checkSharedLUN reports nodes that do not see a LUN of a shared volume group.
func checkSharedLUN(in *input) []Finding {
	var out []Finding
	in.eachVG(func(node string, v *console.NodeView, g *console.VolumeGroupView) {
		if g.Topic == nil || g.Topic.Code != explain.TopicSharedLUNMissing {
			return
		}
		f := fromExplanation(*g.Topic, fmt.Sprintf("A LUN of shared volume group %s is not visible on node %s, so the node cannot join the volume "+
			"group; the other nodes are not affected. The agent says: %q.", g.Name, node, g.Message))
		f.Node, f.VolumeGroup, f.Device, f.InvolvedObject, f.Codes = node, g.Name, missingLUN(g.Message), refObject(g.Source), []string{g.Topic.Code}
		out = append(out, f)
	})
	return out
}

// missingLUN reads the LUN out of the agent's "LUN <path> of shared volume group <vg> is not visible on this
// node" (nodeagent/shared); "" when the message is shaped otherwise.
func missingLUN(msg string) string {
	rest, ok := strings.CutPrefix(msg, "LUN ")
	if !ok {
		return ""
	}
	lun, _, ok := strings.Cut(rest, " of shared volume group ")
	if !ok {
		return ""
	}
	return lun
}

// checkHostIDConflict reports sanlock host IDs that more than one node reports. Bundles do not collect the
// host-ID Leases, so the nodes' own reports (LVMNode status.sharedLocking.hostID) are what is compared.
func checkHostIDConflict(in *input) []Finding {
	type key struct {
		namespace string
		id        int32
	}
	holders := map[key][]string{}
	for i := range in.snap.LVMNodes {
		n := &in.snap.LVMNodes[i]
		if sl := n.Status.SharedLocking; sl != nil && sl.HostID > 0 {
			k := key{n.Namespace, sl.HostID}
			if !slices.Contains(holders[k], n.Name) {
				holders[k] = append(holders[k], n.Name)
			}
		}
	}
	keys := make([]key, 0, len(holders))
	for k := range holders {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		return int(a.id - b.id)
	})
	var out []Finding
	for _, k := range keys {
		nodes := holders[k]
		if len(nodes) < 2 {
			continue
		}
		slices.Sort(nodes)
		lease := "lvms-host-id-" + strconv.Itoa(int(k.id))
		// No node in the context: the steps are for whichever node does not hold the Lease.
		f := fromExplanation(explain.Topic(explain.TopicHostIDConflict, "", explain.Context{}), fmt.Sprintf(
			"Nodes %s report the same sanlock host ID, %d; the Lease %s/%s names the one node that owns it. sanlock keeps the others "+
				"out of the lockspaces, or, if they get in, the locks no longer keep the nodes apart.",
			andList(nodes), k.id, k.namespace, lease))
		f.Node, f.Codes = nodes[0], []string{explain.TopicHostIDConflict}
		f.InvolvedObject = &Object{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: k.namespace, Name: lease}
		out = append(out, f)
	}
	return out
}

// checkNoWatchdog warns, once per node, about sanlock running without a watchdog.
func checkNoWatchdog(in *input) []Finding {
	var out []Finding
	for _, name := range in.names {
		v := in.views[name]
		d, ok := lockingFinding(v, explain.TopicNoWatchdog)
		if !ok {
			continue
		}
		f := fromExplanation(d.Explanation, fmt.Sprintf("sanlock on node %s runs without a watchdog, so the node is not fenced: if it loses its "+
			"leases it is not reset, and other nodes may take its locks over while it can still write to the shared volume groups. "+
			"The agent says: %q.", name, v.SharedLocking.Fencing))
		f.Node, f.InvolvedObject, f.Codes = name, nodeObject(v), []string{d.Explanation.Code}
		out = append(out, f)
	}
	return out
}

// andList joins names as "a and b" or "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
