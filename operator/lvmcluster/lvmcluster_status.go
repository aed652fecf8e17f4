package lvmcluster

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/conditions"
	"github.com/lvms-dev/lvms/operator/nodeset"
)

// Condition types of the LVMCluster: LVMS's two, and NoConflicts shared with the v2 API.
const (
	ConditionResourcesAvailable = "ResourcesAvailable"
	ConditionVolumeGroupsReady  = "VolumeGroupsReady"
	ConditionNoConflicts        = lvmv2.ConditionNoConflicts
)

var conditionOrder = []string{ConditionResourcesAvailable, ConditionVolumeGroupsReady, ConditionNoConflicts}

// Condition reasons; the first ones are LVMS's.
const (
	ReasonResourcesAvailable  = "ResourcesAvailable"
	ReasonResourcesIncomplete = "ResourcesSyncIncomplete"
	ReasonMultipleClusters    = "MultipleLVMClusters"
	ReasonVGsReady            = "VGsReady"
	ReasonVGsFailed           = "VGsFailed"
	ReasonVGsDegraded         = "VGsDegraded"
	ReasonVGsInProgress       = "VGReadinessInProgress"
	ReasonVGsUnmanaged        = "VGsUnmanaged"
	ReasonNoNodes             = "NoNodesSelected"
	ReasonNoConflicts         = "NoConflicts"
	ReasonConflict            = "Conflict"
	ReasonDeletionPending     = "DeletionPending"
	ReasonAgentsUnconfined    = nodeset.ReasonAgentsUnconfined
	reasonExternalNotReported = "ExternalConfigurationNotReported"
	maxListed                 = 5
)

// statusInput is everything the LVMCluster's status is derived from.
type statusInput struct {
	Generation int64
	// RefusedBy names the LVMCluster managed instead of this one.
	RefusedBy        string
	Deleting         bool
	DeletionBlockers string
	External         bool
	ApplyErr         error
	Taken            []string
	Removing         []string
	// Missing driver objects (CSIDriver, DaemonSet).
	Missing []string
	// Unconfined says what is wrong with the admission policies that confine the node agents ("" nothing).
	Unconfined string
	// Classes in spec order, each with the managed nodes it selects (sorted).
	Classes []classInput
	// NodeStatuses of the managed nodes, sorted by node.
	NodeStatuses  []nodeStatusInput
	Conflicts     []string
	Now           time.Time
	ReportTimeout time.Duration
}

type classInput struct {
	Name      string
	Nodes     []string
	SelectErr error
}

type nodeStatusInput struct {
	Node string
	// Status is nil until it exists.
	Status *lvmv1.LVMVolumeGroupNodeStatus
}

// setStatus derives the whole status of an LVMCluster from in.
func setStatus(st *lvmv1.LVMClusterStatus, in statusInput) {
	st.ObservedGeneration = in.Generation
	if in.RefusedBy != "" {
		msg := fmt.Sprintf("only one LVMCluster per namespace is supported and LVMCluster %s is the one managed here; delete this LVMCluster or move its device classes into %s", in.RefusedBy, in.RefusedBy)
		conditions.Set(&st.Conditions, metav1.Condition{Type: ConditionResourcesAvailable, Status: metav1.ConditionFalse, Reason: ReasonMultipleClusters, Message: msg}, in.Generation, conditionOrder)
		conditions.Set(&st.Conditions, metav1.Condition{Type: ConditionVolumeGroupsReady, Status: metav1.ConditionFalse, Reason: ReasonMultipleClusters, Message: msg}, in.Generation, conditionOrder)
		st.DeviceClassStatuses = nil
		st.State, st.Ready, st.Message = lvmv1.LVMStatusFailed, false, msg
		return
	}
	st.DeviceClassStatuses = deviceClassStatuses(in)
	setResourcesCondition(st, in)
	setVolumeGroupsCondition(st, in)
	setNoConflictsCondition(st, in)
	setState(st, in)
}

// deviceClassStatuses lists every device class with the state of its volume group on each managed node it
// selects; with external configuration, whatever the agents report, grouped by volume group.
func deviceClassStatuses(in statusInput) []lvmv1.DeviceClassStatus {
	byNode := map[string]*lvmv1.LVMVolumeGroupNodeStatus{}
	for _, ns := range in.NodeStatuses {
		byNode[ns.Node] = ns.Status
	}
	if in.External {
		groups := map[string][]lvmv1.NodeStatus{}
		for _, ns := range in.NodeStatuses {
			if ns.Status == nil {
				continue
			}
			for _, vg := range ns.Status.Spec.LVMVGStatus {
				groups[vg.Name] = append(groups[vg.Name], lvmv1.NodeStatus{Node: ns.Node, VGStatus: vg})
			}
		}
		var out []lvmv1.DeviceClassStatus
		for _, name := range sortedKeys(groups) {
			out = append(out, lvmv1.DeviceClassStatus{Name: name, NodeStatus: groups[name]})
		}
		return out
	}
	var out []lvmv1.DeviceClassStatus
	for _, cls := range in.Classes {
		dcs := lvmv1.DeviceClassStatus{Name: cls.Name}
		for _, node := range cls.Nodes {
			dcs.NodeStatus = append(dcs.NodeStatus, lvmv1.NodeStatus{Node: node, VGStatus: vgStatusOn(byNode[node], cls.Name, in)})
		}
		out = append(out, dcs)
	}
	return out
}

// vgStatusOn is the state of volume group name on a node, as its agent reported it, or why there is none.
func vgStatusOn(st *lvmv1.LVMVolumeGroupNodeStatus, name string, in statusInput) lvmv1.VGStatus {
	if st != nil {
		for _, vg := range st.Spec.LVMVGStatus {
			if vg.Name == name {
				return vg
			}
		}
	}
	// The policy is the CRD's default: the API server stores it when it is empty, and a status computed
	// without it would differ from the stored one at every reconcile (a write each time).
	out := lvmv1.VGStatus{Name: name, Status: lvmv1.VGStatusProgressing, Reason: "waiting for the node agent to report the volume group",
		DeviceDiscoveryPolicy: lvmv1.DeviceDiscoveryPolicyRuntimeStatic}
	if st != nil && in.ReportTimeout > 0 && len(st.Spec.LVMVGStatus) == 0 && st.Status.ObservedGeneration == 0 {
		if since := in.Now.Sub(st.CreationTimestamp.Time); since >= in.ReportTimeout {
			out.Status = lvmv1.VGStatusDegraded
			out.Reason = fmt.Sprintf("the node agent has not reported for %s; check that the lvms-node-agent pod runs on the node", since.Round(time.Second))
		}
	}
	return out
}

func setResourcesCondition(st *lvmv1.LVMClusterStatus, in statusInput) {
	c := metav1.Condition{Type: ConditionResourcesAvailable, Status: metav1.ConditionTrue, Reason: ReasonResourcesAvailable,
		Message: "Reconciliation is complete and all the resources are available"}
	var problems []string
	if in.ApplyErr != nil {
		problems = append(problems, in.ApplyErr.Error())
	}
	problems = append(problems, in.Taken...)
	if len(in.Missing) > 0 {
		problems = append(problems, "waiting for "+strings.Join(in.Missing, " and ")+" to be created")
	}
	problems = append(problems, in.Removing...)
	if in.Deleting && in.DeletionBlockers != "" {
		c.Reason = ReasonDeletionPending
		problems = append([]string{in.DeletionBlockers}, problems...)
	} else if len(problems) > 0 {
		c.Reason = ReasonResourcesIncomplete
	} else if in.Unconfined != "" {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonAgentsUnconfined
		c.Message = in.Unconfined + "; LVMS refuses volume moves and new shared volumes until then"
	}
	if len(problems) > 0 {
		c.Status = metav1.ConditionFalse
		c.Message = "Resources have not yet been fully synced to the cluster: " + strings.Join(problems, "; ")
		if c.Reason == ReasonDeletionPending {
			c.Message = strings.Join(problems, "; ")
		}
	}
	conditions.Set(&st.Conditions, c, in.Generation, conditionOrder)
}

func setVolumeGroupsCondition(st *lvmv1.LVMClusterStatus, in statusInput) {
	c := metav1.Condition{Type: ConditionVolumeGroupsReady}
	if in.External {
		reported := 0
		for _, ns := range in.NodeStatuses {
			if ns.Status != nil && (len(ns.Status.Spec.LVMVGStatus) > 0 || ns.Status.Status.ObservedGeneration > 0) {
				reported++
			}
		}
		if reported == len(in.NodeStatuses) && reported > 0 {
			c.Status, c.Reason = metav1.ConditionTrue, ReasonVGsUnmanaged
			c.Message = "VGs are unmanaged and come from each node's lvmd.yaml (ExternalConfiguration); deviceClassStatuses shows what the node agents found"
		} else {
			c.Status, c.Reason = metav1.ConditionFalse, reasonExternalNotReported
			c.Message = fmt.Sprintf("%d of %d nodes have reported their lvmd.yaml", reported, len(in.NodeStatuses))
		}
		failed, degraded := badNodes(st.DeviceClassStatuses)
		if len(failed)+len(degraded) > 0 {
			c.Status, c.Reason = metav1.ConditionFalse, ReasonVGsDegraded
			c.Message = "the host lvmd.yaml of some nodes has problems: " + listSome(append(failed, degraded...))
		}
		conditions.Set(&st.Conditions, c, in.Generation, conditionOrder)
		return
	}
	var selectErrs, empty []string
	for _, cls := range in.Classes {
		switch {
		case cls.SelectErr != nil:
			selectErrs = append(selectErrs, fmt.Sprintf("device class %s has an invalid node selector: %v", cls.Name, cls.SelectErr))
		case len(cls.Nodes) == 0:
			empty = append(empty, cls.Name)
		}
	}
	failed, degraded := badNodes(st.DeviceClassStatuses)
	total, ready := 0, 0
	for _, dcs := range st.DeviceClassStatuses {
		for _, ns := range dcs.NodeStatus {
			total++
			if ns.Status == lvmv1.VGStatusReady {
				ready++
			}
		}
	}
	switch {
	case len(selectErrs) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonVGsFailed, strings.Join(selectErrs, "; ")
	case len(failed) > 0 && len(failed) == total:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonVGsFailed
		c.Message = "every volume group failed: " + listSome(failed)
	case len(failed)+len(degraded) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonVGsDegraded
		c.Message = fmt.Sprintf("%d of %d volume groups are not ready: %s", len(failed)+len(degraded), total, listSome(append(failed, degraded...)))
	case len(empty) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNoNodes
		c.Message = fmt.Sprintf("device classes %s select no node this LVMCluster manages; check their node selectors, the tolerations and the nodes' taints", strings.Join(empty, ", "))
	case ready < total:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonVGsInProgress
		c.Message = fmt.Sprintf("%d of %d volume groups are ready", ready, total)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonVGsReady
		c.Message = fmt.Sprintf("all %d volume groups are ready", total)
	}
	conditions.Set(&st.Conditions, c, in.Generation, conditionOrder)
}

// badNodes lists "<vg> on <node>: <reason>" for failed and for degraded volume groups.
func badNodes(dcs []lvmv1.DeviceClassStatus) (failed, degraded []string) {
	for _, d := range dcs {
		for _, ns := range d.NodeStatus {
			msg := fmt.Sprintf("%s on %s: %s", d.Name, ns.Node, firstNonEmpty(ns.Reason, string(ns.Status)))
			switch ns.Status {
			case lvmv1.VGStatusFailed:
				failed = append(failed, msg)
			case lvmv1.VGStatusDegraded:
				degraded = append(degraded, msg)
			}
		}
	}
	return failed, degraded
}

func setNoConflictsCondition(st *lvmv1.LVMClusterStatus, in statusInput) {
	c := metav1.Condition{Type: ConditionNoConflicts, Status: metav1.ConditionTrue, Reason: ReasonNoConflicts,
		Message: "no LVMNodeSet claims this LVMCluster's nodes"}
	if len(in.Conflicts) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonConflict, listSome(in.Conflicts)
	}
	conditions.Set(&st.Conditions, c, in.Generation, conditionOrder)
}

// setState folds the conditions with LVMS's precedence Failed > Degraded > Progressing > Ready.
func setState(st *lvmv1.LVMClusterStatus, in statusInput) {
	res := conditions.Get(st.Conditions, ConditionResourcesAvailable)
	vgs := conditions.Get(st.Conditions, ConditionVolumeGroupsReady)
	conf := conditions.Get(st.Conditions, ConditionNoConflicts)
	switch {
	case in.Deleting:
		st.State, st.Message = lvmv1.LVMStatusProgressing, "deleting: "+firstNonEmpty(in.DeletionBlockers, "removing volume groups, node statuses and storage classes")
	case vgs.Reason == ReasonVGsFailed || (res.Status == metav1.ConditionFalse && (in.ApplyErr != nil || len(in.Taken) > 0)):
		st.State = lvmv1.LVMStatusFailed
		st.Message = firstNonEmpty(falseMessage(vgs, ReasonVGsFailed), res.Message)
	case vgs.Reason == ReasonVGsDegraded || vgs.Reason == ReasonNoNodes || conf.Status == metav1.ConditionFalse:
		st.State = lvmv1.LVMStatusDegraded
		st.Message = firstNonEmpty(falseMessage(vgs, ReasonVGsDegraded), falseMessage(vgs, ReasonNoNodes), conf.Message)
		if conf.Status == metav1.ConditionFalse && vgs.Status == metav1.ConditionTrue {
			st.Message = conf.Message
		}
	case res.Reason == ReasonAgentsUnconfined && vgs.Status == metav1.ConditionTrue:
		st.State, st.Message = lvmv1.LVMStatusDegraded, res.Message // the volumes work; what keeps a node agent to its node does not
	case vgs.Status == metav1.ConditionFalse || res.Status == metav1.ConditionFalse:
		st.State = lvmv1.LVMStatusProgressing
		st.Message = firstNonEmpty(falseMessage(vgs, vgs.Reason), falseMessage(res, res.Reason))
	case vgs.Status == metav1.ConditionTrue && res.Status == metav1.ConditionTrue:
		st.State, st.Message = lvmv1.LVMStatusReady, ""
	default:
		st.State, st.Message = lvmv1.LVMStatusUnknown, ""
	}
	st.Ready = st.State == lvmv1.LVMStatusReady
}

func falseMessage(c *metav1.Condition, reason string) string {
	if c == nil || c.Status == metav1.ConditionTrue || c.Reason != reason {
		return ""
	}
	return c.Message
}

func conditionText(conds []metav1.Condition, t string) string {
	if c := conditions.Get(conds, t); c != nil {
		return string(c.Status) + c.Message
	}
	return ""
}

func listSome(items []string) string {
	items = slices.Clone(items)
	if len(items) <= maxListed {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:maxListed], "; ") + fmt.Sprintf("; and %d more", len(items)-maxListed)
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
