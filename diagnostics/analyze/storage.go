package analyze

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/explain"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// readyStates are node states that need no attention.
var readyStates = []string{string(lvmv2.StateReady), string(lvmv2.StateHealthy)}

// checkNodeNotReady reports every node whose LVMS state is not Ready, with the worst difference as cause.
func checkNodeNotReady(in *input) []Finding {
	var out []Finding
	for _, name := range in.names {
		v := in.views[name]
		if v == nil || slices.Contains(readyStates, v.State) {
			continue
		}
		sev := Warn
		if v.State == string(lvmv2.StateDegraded) || v.State == string(lvmv2.StateFailed) {
			sev = Fail
		}
		msg := fmt.Sprintf("Node %s is %s", name, v.State)
		if v.Message != "" {
			msg += ": " + v.Message
		}
		f := Finding{Severity: sev, Title: "Node storage is " + v.State, Node: name, InvolvedObject: nodeObject(v)}
		if len(v.Differences) > 0 && v.Differences[0].Explanation.Code == lvmv2.ConditionLVMDConfigured {
			continue // checkLVMD reports that cause for the node: one finding per cause
		}
		if len(v.Differences) > 0 {
			d := v.Differences[0]
			x := d.Explanation
			where := strings.Join(nonEmpty("volume group "+d.VolumeGroup, "device "+d.Device, "device class "+d.DeviceClass), ", ")
			msg += fmt.Sprintf(". Cause: %s", x.Title)
			if where != "" {
				msg += " (" + where + ")"
			}
			msg += ": " + strings.TrimSuffix(x.Why, ".")
			f.Fix, f.Command = fixOf(x)
			f.Warning = x.Warning
			f.Codes = []string{x.Code}
			f.VolumeGroup, f.Device = d.VolumeGroup, d.Device
		} else {
			f.Fix = "Read the node agent's log on " + name + " and the node's events."
		}
		f.Message = strings.TrimSuffix(msg, ".") + "."
		out = append(out, f)
	}
	return out
}

// nonEmpty keeps the phrases whose last word is not empty ("device " is dropped).
func nonEmpty(phrases ...string) []string {
	var out []string
	for _, p := range phrases {
		if !strings.HasSuffix(p, " ") {
			out = append(out, p)
		}
	}
	return out
}

// eachVG calls fn for every volume group of every node, in order.
func (in *input) eachVG(fn func(node string, v *console.NodeView, g *console.VolumeGroupView)) {
	for _, name := range in.names {
		v := in.views[name]
		if v == nil {
			continue
		}
		for i := range v.VolumeGroups {
			fn(name, v, &v.VolumeGroups[i])
		}
	}
}

func reasonOf(rs []console.Reason, code string) (console.Reason, bool) {
	for _, r := range rs {
		if r.Code == code {
			return r, true
		}
	}
	return console.Reason{}, false
}

// checkRequiredPath reports device paths the spec names that do not exist on the node.
func checkRequiredPath(in *input) []Finding {
	var out []Finding
	in.eachVG(func(node string, v *console.NodeView, g *console.VolumeGroupView) {
		for _, r := range g.Devices {
			reason, ok := reasonOf(r.Reasons, string(lvmv2.ReasonNotFound))
			if r.State != console.DeviceMissing || !ok {
				continue
			}
			f := fromExplanation(reason.Explanation, fmt.Sprintf("%s, which %s names for volume group %s, does not exist on node %s: %s",
				r.KName, g.Source, g.Name, node, reason.Sentence))
			if strings.Contains(r.Desired, "optional") {
				f.Severity = Warn
				f.Message = fmt.Sprintf("Optional path %s of volume group %s does not exist on node %s.", r.KName, g.Name, node)
			}
			f.Node, f.VolumeGroup, f.Device, f.Codes, f.InvolvedObject = node, g.Name, r.KName, []string{reason.Code}, refObject(g.Source)
			out = append(out, f)
		}
	})
	// The agent's own verdicts name required paths the status may not (yet) report.
	for _, node := range sortedNodes(in) {
		for _, g := range in.b.Nodes[node].View.Verdicts {
			for _, p := range g.MissingRequired {
				if slices.ContainsFunc(out, func(f Finding) bool { return f.Node == node && f.VolumeGroup == g.Name && f.Device == p }) {
					continue
				}
				x := explain.Reason(string(lvmv2.ReasonNotFound), explain.Context{Node: node, Device: p, VolumeGroup: g.Name})
				f := fromExplanation(x, fmt.Sprintf("%s, a required path of volume group %s, does not exist on node %s (the node agent's own verdict).", p, g.Name, node))
				f.Node, f.VolumeGroup, f.Device, f.Codes = node, g.Name, p, []string{string(lvmv2.ReasonNotFound)}
				out = append(out, f)
			}
		}
	}
	return out
}

// inUse: device states that make a device part of the volume group.
var inUse = []console.DeviceState{console.DeviceInVG, console.DeviceWiped, console.DeviceUnexpected}

// checkAllExcluded reports desired volume groups none of whose candidate devices can be used.
func checkAllExcluded(in *input) []Finding {
	var out []Finding
	in.eachVG(func(node string, v *console.NodeView, g *console.VolumeGroupView) {
		if !g.InSpec || len(g.Devices) == 0 || slices.ContainsFunc(g.Devices, func(r console.DeviceRow) bool { return slices.Contains(inUse, r.State) }) {
			return
		}
		if strings.EqualFold(g.AccessPolicy, string(lvmv2.AccessPolicyShared)) {
			return // the agent lists no LUNs of a shared volume group: the shared checks judge it
		}
		var parts []string
		var worst *console.Reason
		for _, r := range g.Devices {
			var codes []string
			for i, reason := range r.Reasons {
				codes = append(codes, reason.Code)
				if worst == nil || reason.Explanation.Severity.Rank() > worst.Explanation.Severity.Rank() {
					worst = &r.Reasons[i]
				}
			}
			if len(codes) == 0 {
				codes = []string{string(r.State)}
			}
			parts = append(parts, r.KName+" ("+strings.Join(codes, ", ")+")")
		}
		f := Finding{Severity: Fail, Title: "Every device of the volume group is excluded", Node: node, VolumeGroup: g.Name,
			InvolvedObject: refObject(g.Source),
			Message:        fmt.Sprintf("Volume group %s on node %s has no device it can use: %s.", g.Name, node, strings.Join(parts, "; ")),
			Fix:            "Free one of the devices or point the device selector at a device that can be used; each device's reasons say what stands in the way."}
		if worst != nil {
			fix, cmd := fixOf(worst.Explanation)
			f.Fix += " For " + worst.Code + ": " + fix
			f.Command, f.Warning = cmd, worst.Explanation.Warning
		}
		out = append(out, f)
	})
	// The agent's own verdicts: a volume group that does not exist and whose every device is excluded.
	for _, node := range sortedNodes(in) {
		for _, g := range in.b.Nodes[node].View.Verdicts {
			if g.Exists || len(g.Devices) == 0 || slices.ContainsFunc(g.Devices, func(d diagnostics.DeviceVerdict) bool { return d.Verdict != diagnostics.VerdictExcluded }) ||
				slices.ContainsFunc(out, func(f Finding) bool { return f.Node == node && f.VolumeGroup == g.Name }) {
				continue
			}
			var parts []string
			for _, d := range g.Devices {
				var codes []string
				for _, r := range d.Reasons {
					codes = append(codes, r.Code)
				}
				parts = append(parts, d.KName+" ("+strings.Join(codes, ", ")+")")
			}
			out = append(out, Finding{Severity: Fail, Title: "Every device of the volume group is excluded", Node: node, VolumeGroup: g.Name,
				Message: fmt.Sprintf("Volume group %s does not exist on node %s and the node agent excludes every candidate: %s.", g.Name, node, strings.Join(parts, "; ")),
				Fix:     "Free one of the devices or point the device selector at a device that can be used; each device's reasons say what stands in the way."})
		}
	}
	return out
}

// checkDeviceExcluded reports every excluded candidate with its reason codes; expected exclusions (a boot
// partition, a device the selector does not pick) pass.
func checkDeviceExcluded(in *input) []Finding {
	var out []Finding
	in.eachVG(func(node string, v *console.NodeView, g *console.VolumeGroupView) {
		for _, r := range g.Devices {
			if r.State != console.DeviceExcluded || len(r.Reasons) == 0 {
				continue
			}
			worst := r.Reasons[0]
			var codes, sentences []string
			for _, reason := range r.Reasons {
				codes = append(codes, reason.Code)
				sentences = append(sentences, strings.TrimSuffix(reason.Sentence, "."))
				if reason.Explanation.Severity.Rank() > worst.Explanation.Severity.Rank() {
					worst = reason
				}
			}
			f := fromExplanation(worst.Explanation, fmt.Sprintf("%s on node %s is not used by volume group %s: %s.",
				r.KName, node, g.Name, strings.Join(sentences, "; ")))
			f.Title = "Device excluded: " + worst.Explanation.Title
			f.Node, f.VolumeGroup, f.Device, f.Codes, f.InvolvedObject = node, g.Name, r.KName, codes, refObject(g.Source)
			out = append(out, f)
		}
	})
	return out
}

// checkVolumeGroupMissing reports desired volume groups the agent does not report, or reports Missing or
// Failed; and, from the agent's own view, desired volume groups LVM does not have.
func checkVolumeGroupMissing(in *input) []Finding {
	var out []Finding
	in.eachVG(func(node string, v *console.NodeView, g *console.VolumeGroupView) {
		if !g.InSpec {
			return
		}
		ctx := explain.Context{Node: node, VolumeGroup: g.Name}
		switch {
		case !g.Reported:
			f := fromExplanation(explain.Topic(explain.TopicVolumeGroupNotReported, "", ctx), "")
			f.Node, f.VolumeGroup, f.InvolvedObject = node, g.Name, refObject(g.Source)
			out = append(out, f)
		case g.Lockspace == string(lvmv2.LockspaceNotJoined):
			return // a shared volume group out of its lockspace: checkLockspace and checkSharedLUN say why
		case g.State == string(lvmv2.StateMissing) || g.State == string(lvmv2.StateFailed):
			detail := ""
			if g.Message != "" {
				detail = "The agent says: \"" + g.Message + "\"."
			}
			f := fromExplanation(explain.Topic(explain.TopicVolumeGroupUnhealthy, detail, ctx), "")
			f.Severity, f.Title = Fail, "Volume group "+g.State
			f.Node, f.VolumeGroup, f.InvolvedObject = node, g.Name, refObject(g.Source)
			out = append(out, f)
		}
	})
	return out
}

// checkThinPool reports thin pools whose data or metadata is at or above the console's thresholds, from the
// node status (v2) and, where the status has no pools (v1), from the agent's LVM report.
func checkThinPool(in *input) []Finding {
	var out []Finding
	seen := map[string]bool{}
	in.eachVG(func(node string, v *console.NodeView, g *console.VolumeGroupView) {
		for _, p := range g.Pools {
			for _, d := range p.Findings {
				if d.Explanation.Code != explain.TopicThinDataHigh && d.Explanation.Code != explain.TopicThinMetadataHigh {
					continue
				}
				seen[node+"/"+g.Name+"/"+p.Name+"/"+d.Explanation.Code] = true
				f := fromExplanation(d.Explanation, fmt.Sprintf("Thin pool %s of volume group %s on node %s: %s", p.Name, g.Name, node, d.Explanation.Why))
				f.Node, f.VolumeGroup, f.Device, f.Codes, f.InvolvedObject = node, g.Name, p.Name, []string{d.Explanation.Code}, refObject(g.Source)
				out = append(out, f)
			}
		}
	})
	for _, node := range sortedNodes(in) {
		st := in.b.Nodes[node]
		if len(st.View.FullReport) == 0 {
			continue
		}
		rep, err := lvm.ParseReport(st.View.FullReport)
		if err != nil {
			continue
		}
		for _, lv := range rep.LVs {
			if !lv.IsThinPool() {
				continue
			}
			for _, u := range []struct{ kind, pct, code string }{
				{"metadata", lv.MetadataPercent, explain.TopicThinMetadataHigh}, {"data", lv.DataPercent, explain.TopicThinDataHigh}} {
				pct, err := strconv.ParseFloat(strings.TrimSpace(u.pct), 64)
				if err != nil || seen[node+"/"+lv.VGName+"/"+lv.Name+"/"+u.code] {
					continue
				}
				x, ok := explain.ThinUsage(u.kind, pct, explain.Context{Node: node, VolumeGroup: lv.VGName})
				if !ok {
					continue
				}
				f := fromExplanation(x, fmt.Sprintf("Thin pool %s of volume group %s on node %s (from the agent's LVM report): %s", lv.Name, lv.VGName, node, x.Why))
				f.Node, f.VolumeGroup, f.Device, f.Codes = node, lv.VGName, lv.Name, []string{x.Code}
				out = append(out, f)
			}
		}
	}
	return out
}

// sortedNodes lists the nodes with an agent view, sorted.
func sortedNodes(in *input) []string {
	out := make([]string, 0, len(in.b.Nodes))
	for n := range in.b.Nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
