package analyze

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/operator/names"
)

// Skew thresholds.
const (
	ClockSkewWarn = 30 * time.Second
	ClockSkewFail = 5 * time.Minute
)

// checkCollection reports what the bundle lacks: failed collectors, the time and size limits, unreadable
// files.
func checkCollection(in *input) []Finding {
	var out []Finding
	m := in.b.Manifest
	for _, c := range m.Failed() {
		out = append(out, Finding{Severity: Warn, Title: "A collector failed", InvolvedObject: &Object{Kind: "Collector", Name: c.Name},
			Message: fmt.Sprintf("Collector %s failed, so the bundle may lack what it collects: %s", c.Name, c.Error),
			Fix:     "If the error is about permissions, collect again as a cluster administrator; if a node agent was unreachable, check its pod. Analysis goes on with what the bundle holds."})
	}
	if m.TimedOut {
		out = append(out, Finding{Severity: Warn, Title: "Collection timed out", Message: fmt.Sprintf("Collection stopped after %s; later collectors did not run.", m.Options.Timeout),
			Fix: "Collect again with a larger --timeout."})
	}
	if m.SizeLimitReached {
		out = append(out, Finding{Severity: Warn, Title: "Bundle size limit reached", Message: fmt.Sprintf("Files were left out at the size limit of %d bytes.", m.Options.MaxBytes),
			Fix: "Collect again with a larger --max-size, a shorter --since, or a smaller --log-limit-bytes."})
	}
	for _, p := range in.b.Problems {
		out = append(out, Finding{Severity: Warn, Title: "A bundle file could not be read", Message: p, Fix: "The bundle may have been edited or damaged; collect it again."})
	}
	return out
}

// isAgentPod reports whether a pod is a node agent.
func isAgentPod(p *corev1.Pod) bool {
	return p.Labels[names.ComponentLabel] == names.ComponentNodeAgent
}

// podReady reports whether a pod runs and is Ready.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podTrouble describes why a pod is not ready, from its container states.
func podTrouble(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			s := "container " + c.Name + " waiting: " + c.State.Waiting.Reason
			if c.State.Waiting.Message != "" {
				s += " (" + c.State.Waiting.Message + ")"
			}
			parts = append(parts, s)
		case c.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("container %s terminated: %s, exit code %d", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode))
		case !c.Ready:
			parts = append(parts, "container "+c.Name+" not ready")
		}
		if c.RestartCount > 0 {
			parts = append(parts, fmt.Sprintf("%d restarts", c.RestartCount))
		}
	}
	return strings.Join(parts, ", ")
}

// checkAgentNotReady reports selected nodes without a running, ready node agent.
func checkAgentNotReady(in *input) []Finding {
	if !in.ran("node-agent-pods") {
		return []Finding{{Severity: Warn, Title: "Node agents not checked", Message: "The node agent pods could not be listed, so whether they run is unknown.",
			Fix: "Collect again with permission to list pods in every namespace."}}
	}
	selected := in.selectedNodes()
	for _, n := range in.names {
		if _, ok := selected[n]; !ok {
			selected[n] = nil
		}
	}
	known := map[string]bool{}
	for i := range in.snap.Nodes {
		known[in.snap.Nodes[i].Name] = true
	}
	var out []Finding
	for _, node := range sortedKeys(selected) {
		if !known[node] {
			continue // the NodeMissing difference covers a node that does not exist
		}
		var agents []*corev1.Pod
		for _, p := range in.pods {
			if isAgentPod(p) && p.Spec.NodeName == node {
				agents = append(agents, p)
			}
		}
		why := "it has LVMS state"
		if objs := selected[node]; len(objs) > 0 {
			var s []string
			for _, o := range objs {
				s = append(s, o.String())
			}
			why = strings.Join(s, " and ") + " selects it"
		}
		if len(agents) == 0 {
			if reportsOutsidePods(in, node) {
				out = append(out, Finding{Severity: Warn, Title: "Node agent runs outside a pod", Node: node,
					InvolvedObject: &Object{APIVersion: "v1", Kind: "Node", Name: node},
					Message: fmt.Sprintf("No node agent pod runs on node %s, but its agent reports: %s. It runs as a host process "+
						"(the local sandbox, or started by hand) that the DaemonSet does not manage, or the DaemonSet went away after it last reported.", node, agentEvidence(in, node)),
					Fix:     "Nothing to do in the sandbox. In a cluster, check that the node agent DaemonSet exists and runs a pod on the node, so the agent is restarted and upgraded with LVMS.",
					Command: "kubectl get daemonset " + names.NodeAgent + " -A -o wide"})
				continue
			}
			out = append(out, Finding{Severity: Fail, Title: "No node agent on a selected node", Node: node,
				InvolvedObject: &Object{APIVersion: "v1", Kind: "Node", Name: node},
				Message:        fmt.Sprintf("No node agent pod runs on node %s, but %s: nothing manages its volume groups or serves its volumes.", node, why),
				Fix:            "Check the node agent DaemonSet: its node affinity and tolerations must allow the node (look at the node's taints), and its pods must be schedulable there.",
				Command:        "kubectl get daemonset " + names.NodeAgent + " -A -o wide; kubectl describe node " + node})
			continue
		}
		if slices.ContainsFunc(agents, podReady) {
			continue
		}
		p := agents[0]
		out = append(out, Finding{Severity: Fail, Title: "Node agent not ready", Node: node,
			InvolvedObject: &Object{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name},
			Message:        fmt.Sprintf("The node agent pod %s/%s on node %s is not ready (%s); %s.", p.Namespace, p.Name, node, podTrouble(p), why),
			Fix:            "Read the pod's log (and the previous container's after a restart) and its events.",
			Command:        fmt.Sprintf("kubectl logs -n %s %s --previous; kubectl describe pod -n %s %s", p.Namespace, p.Name, p.Namespace, p.Name)})
	}
	return out
}

// checkLVMD reports lvmd.yaml missing, invalid, or naming volume groups or thin pools LVM does not have, and
// the LVMDConfigured condition when it is False.
func checkLVMD(in *input) []Finding {
	var out []Finding
	reported := map[string]bool{}
	for _, node := range sortedNodes(in) {
		st := in.b.Nodes[node]
		l := st.View.LVMD
		if l == nil {
			continue
		}
		obj := &Object{APIVersion: "v1", Kind: "Node", Name: node}
		if v := in.views[node]; v != nil {
			obj = nodeObject(v)
		}
		f := Finding{Severity: Fail, Node: node, InvolvedObject: obj, Codes: []string{lvmv2.ConditionLVMDConfigured}}
		switch {
		case !l.Exists:
			if v := in.views[node]; v == nil || len(v.DeviceClasses) == 0 {
				continue
			}
			f.Title = "lvmd.yaml is missing"
			f.Message = fmt.Sprintf("%s does not exist on node %s, but the node has device classes: the CSI driver cannot provision there.", l.Path, node)
			f.Fix = "The node agent writes the file for managed device classes: read its log. With configurationPolicy: ExternalConfiguration, create the file on the host."
		case l.Invalid != "":
			f.Title = "lvmd.yaml is invalid"
			f.Message = fmt.Sprintf("%s on node %s is not valid lvmd.yaml: %s", l.Path, node, l.Invalid)
			f.Fix = "Fix the file (the message names the key); the node agent and lvmd reload it without a restart."
			f.Command = "cat " + l.Path
		default:
			problems := lvmdAgainstLVM(l.Content, st.View.FullReport)
			if len(problems) == 0 {
				continue
			}
			f.Title = "lvmd.yaml names volume groups or thin pools LVM does not have"
			f.Message = fmt.Sprintf("%s on node %s: %s.", l.Path, node, strings.Join(problems, "; "))
			f.Fix = "Create the missing volume group or thin pool, or correct the device class in lvmd.yaml."
			f.Command = "vgs; lvs"
		}
		reported[node] = true
		out = append(out, f)
	}
	for _, name := range in.names {
		v := in.views[name]
		if v == nil || reported[name] {
			continue
		}
		for _, c := range v.Conditions {
			if c.Type == lvmv2.ConditionLVMDConfigured && c.Status == "False" && c.Explanation != nil {
				f := fromExplanation(*c.Explanation, fmt.Sprintf("Node %s reports %s False (%s): %s", name, c.Type, c.Reason, c.Message))
				f.Node, f.InvolvedObject, f.Codes = name, nodeObject(v), []string{c.Type}
				out = append(out, f)
				break // one finding per node, whichever of its objects reports it
			}
		}
	}
	return out
}

// lvmdAgainstLVM checks a valid lvmd.yaml against the agent's LVM report.
func lvmdAgainstLVM(content string, report []byte) []string {
	cfg, err := lvmd.Parse([]byte(content))
	if err != nil || len(report) == 0 {
		return nil
	}
	rep, err := lvm.ParseReport(report)
	if err != nil {
		return nil
	}
	return cfg.CheckLVM(rep)
}

// checkSkew reports node agents whose clock is off the API server's (or, when the bundle does not know the
// API server's clock, the collector's), and agents or operators running different versions.
func checkSkew(in *input) []Finding {
	var out []Finding
	var offset time.Duration
	reference := "the collector's"
	if o := in.b.Manifest.ServerClockOffset; o != nil {
		offset, reference = *o, "the API server's"
	}
	for _, node := range sortedNodes(in) {
		rec := in.b.Nodes[node].Record
		if rec.AgentTime.IsZero() || rec.FetchedAt.IsZero() {
			continue
		}
		skew := rec.ClockSkew(offset)
		abs := skew
		if abs < 0 {
			abs = -abs
		}
		if abs < ClockSkewWarn {
			continue
		}
		sev := Warn
		if abs >= ClockSkewFail {
			sev = Fail
		}
		dir := "ahead of"
		if skew < 0 {
			dir = "behind"
		}
		out = append(out, Finding{Severity: sev, Title: "Clock skew", Node: node, InvolvedObject: &Object{APIVersion: "v1", Kind: "Node", Name: node},
			Message: fmt.Sprintf("The clock of node %s is %s %s %s clock (agent %s when fetched at %s collector time): tokens, certificates, leases, events and status times disagree.",
				node, abs.Round(time.Second), dir, reference, rec.AgentTime.Format(time.RFC3339), rec.FetchedAt.Format(time.RFC3339)),
			Fix: "Synchronise the node's clock with the control plane's (chrony or systemd-timesyncd).", Command: "chronyc tracking"})
	}
	return append(out, versionSkew(in)...)
}

// versionSkew compares the images of the operator and node agent pods, and the versions the agents report.
func versionSkew(in *input) []Finding {
	images := map[string][]string{} // image -> "operator pod" / "agent on node"
	var operatorImages []string
	for _, p := range in.pods {
		for _, c := range p.Spec.Containers {
			switch {
			case isAgentPod(p):
				images[c.Image] = append(images[c.Image], "node agent on "+p.Spec.NodeName)
			case runsOperator(c):
				images[c.Image] = append(images[c.Image], "operator pod "+p.Name)
				operatorImages = append(operatorImages, c.Image)
			}
		}
	}
	var out []Finding
	if len(images) > 1 && len(operatorImages) > 0 {
		var parts []string
		for _, img := range sortedKeys(images) {
			parts = append(parts, fmt.Sprintf("%s (%s)", img, summarize(images[img])))
		}
		out = append(out, Finding{Severity: Warn, Title: "Version skew between the operator and the node agents",
			Message: "The operator and the node agents run different images: " + strings.Join(parts, "; ") + ".",
			Fix:     "Finish the upgrade: the node agent DaemonSet rolls out the operator's image; check its rollout.", Command: "kubectl rollout status daemonset/" + names.NodeAgent + " -n <lvms namespace>"})
	}
	versions := map[string][]string{}
	for _, node := range sortedNodes(in) {
		if v := in.b.Nodes[node].Record.Version; v != "" {
			versions[v] = append(versions[v], node)
		}
	}
	if len(versions) > 1 {
		var parts []string
		for _, v := range sortedKeys(versions) {
			parts = append(parts, fmt.Sprintf("%s on %s", v, summarize(versions[v])))
		}
		out = append(out, Finding{Severity: Warn, Title: "Node agents run different versions",
			Message: "The node agents report different versions: " + strings.Join(parts, "; ") + ".",
			Fix:     "Finish the node agent DaemonSet's rollout so every node runs the same version."})
	}
	return out
}

// runsOperator reports whether a container runs `lvms operator`.
func runsOperator(c corev1.Container) bool {
	return slices.Contains(c.Args, "operator") || slices.Contains(c.Command, "operator")
}

// summarize lists up to three items and counts the rest.
func summarize(items []string) string {
	slices.Sort(items)
	if len(items) <= 3 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:3], ", "), len(items)-3)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// reportsOutsidePods reports whether the node's agent shows signs of life without a pod: the bundle holds
// a view it answered (collected through a pod or, in the sandbox, directly), or no agent runs as a pod
// anywhere and the node's status describes the current spec.
func reportsOutsidePods(in *input, node string) bool { return agentEvidence(in, node) != "" }

// agentEvidence says how the node's agent showed it runs, or "".
func agentEvidence(in *input, node string) string {
	if st := in.b.Nodes[node]; st != nil && !st.Record.AgentTime.IsZero() {
		return "it answered the bundle's diagnostics request"
	}
	if slices.ContainsFunc(in.pods, isAgentPod) {
		return "" // agents run as pods here: a node without one has none
	}
	if v := in.views[node]; v != nil && len(v.Objects) > 0 {
		current := true
		for _, o := range v.Objects {
			current = current && o.ObservedGeneration > 0 && !o.Stale
		}
		if current {
			return "its status describes the current spec (observed generation " + fmt.Sprint(v.Objects[0].ObservedGeneration) + ")"
		}
	}
	return ""
}
