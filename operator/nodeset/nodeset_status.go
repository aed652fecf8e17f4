package nodeset

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/claims"
	"github.com/lvms-dev/lvms/operator/conditions"
)

// conditionOrder is the order of the set's conditions.
var conditionOrder = []string{lvmv2.ConditionLVMNodesReady, lvmv2.ConditionProviderReady, lvmv2.ConditionNoConflicts}

// maxListed bounds how many nodes or objects one message names.
const maxListed = 5

// MaxStatusNodes bounds status.nodes: a set over more nodes lists only those not Ready, at most this many,
// so that its status stays small (every status write and every watcher gets the whole object; etcd refuses
// objects past 1.5 MB) however many nodes it selects. The counts always cover every node.
const MaxStatusNodes = 256

// Condition reasons of the set.
const (
	ReasonAllReady          = "AllNodesReady"
	ReasonNodesProgressing  = "NodesProgressing"
	ReasonNodesNotReady     = "NodesNotReady"
	ReasonNoNodes           = "NoNodesSelected"
	ReasonInvalidSelector   = "InvalidNodeSelector"
	ReasonProviderReady     = "Deployed"
	ReasonAgentsUnconfined  = "AdmissionPolicyMissing"
	ReasonProviderUnmanaged = "Unmanaged"
	ReasonProviderMissing   = "DriverMissing"
	ReasonClassTaken        = "ClassNameTaken"
	ReasonProviderError     = "ApplyFailed"
	ReasonNoConflicts       = "NoConflicts"
	ReasonConflict          = "Conflict"
	ReasonDeleting          = "Deleting"
	// ReasonRemovalBlocked: a node left the set while volumes of its storage classes live there.
	ReasonRemovalBlocked = "NodeRemovalBlocked"
)

// nodeInput is everything known about one node of the set.
type nodeInput struct {
	Name string
	// Node is nil when the Node object does not exist.
	Node *corev1.Node
	// LVMNode is nil until it is created.
	LVMNode *lvmv2.LVMNode
	Managed bool
	// Waiting is true while the set's migration source still manages the node.
	Waiting bool
	// Conflict is set when another claimant keeps the node.
	Conflict *claims.Conflict
	// Withdrawing is non-empty while the set is being removed from the node: what it waits for.
	Withdrawing string
	// RemovalBlocked is non-empty when the node left the set but its volume groups stay for the volumes
	// named in it.
	RemovalBlocked string
	// Applying is true while the set's template is being applied to the LVMNode: its status is not about
	// the template yet.
	Applying bool
	// ApplyErr is why applying it failed this time (retried).
	ApplyErr error
	// Exclusive is true when no other set shares the LVMNode.
	Exclusive bool
	// VolumeGroups and DeviceClasses are the set's.
	VolumeGroups  []string
	DeviceClasses []string
}

// summarizeNode is the state of one node as the set sees it.
func summarizeNode(in nodeInput, now time.Time, reportTimeout time.Duration) lvmv2.NodeSummary {
	sum := lvmv2.NodeSummary{Name: in.Name}
	switch {
	case in.Withdrawing != "":
		sum.State, sum.Message = lvmv2.StateDeleting, in.Withdrawing
		return sum
	case in.RemovalBlocked != "":
		sum.State, sum.Message = lvmv2.StateDegraded, in.RemovalBlocked
		return sum
	case in.Conflict != nil:
		sum.State, sum.Message = lvmv2.StateConflict, in.Conflict.Message()
		return sum
	case in.Waiting:
		sum.State = lvmv2.StateProgressing
		sum.Message = "waiting for the LVMCluster this set is migrated from to hand the node over"
		return sum
	case in.Node == nil:
		sum.State, sum.Message = lvmv2.StateUnknown, "the Node object no longer exists"
		return sum
	case in.ApplyErr != nil:
		sum.State, sum.Message = lvmv2.StateProgressing, fmt.Sprintf("applying the set's template to the LVMNode failed (retrying): %v", in.ApplyErr)
		return sum
	case in.LVMNode == nil:
		sum.State, sum.Message = lvmv2.StateProgressing, "creating the LVMNode"
		return sum
	case in.Applying:
		sum.State, sum.Message = lvmv2.StateProgressing, "applying the set's template to the LVMNode"
		return sum
	}
	n := in.LVMNode
	if n.Status.ObservedGeneration == 0 && n.Status.State == "" {
		since := now.Sub(n.CreationTimestamp.Time)
		if reportTimeout > 0 && since >= reportTimeout {
			sum.State = lvmv2.StateUnknown
			sum.Message = fmt.Sprintf("the node agent has not reported for %s since the LVMNode was created; check that the lvms-node-agent pod runs on %s", since.Round(time.Second), in.Name)
			return sum
		}
		sum.State, sum.Message = lvmv2.StateProgressing, "waiting for the node agent's first report"
		return sum
	}
	if ready := nodeReadyCondition(in.Node); ready != nil && ready.Status != corev1.ConditionTrue {
		sum.State = lvmv2.StateUnknown
		sum.Message = fmt.Sprintf("node %s is not ready (%s); its storage state is unknown", in.Name, firstNonEmpty(ready.Message, ready.Reason, string(ready.Status)))
		return sum
	}
	if n.Status.ObservedGeneration < n.Generation {
		sum.State = lvmv2.StateProgressing
		sum.Message = fmt.Sprintf("the node agent has not acted on the latest spec yet (generation %d, observed %d)", n.Generation, n.Status.ObservedGeneration)
		return sum
	}
	if in.Exclusive {
		if n.Status.State == lvmv2.StateReady || n.Status.State == "" {
			sum.State = partsState(n, in.VolumeGroups, in.DeviceClasses, &sum.Message)
			return sum
		}
		sum.State = n.Status.State
		sum.Message = firstNonEmpty(n.Status.Message, firstPartMessage(n, in.VolumeGroups, in.DeviceClasses), "the node agent reports "+string(n.Status.State))
		return sum
	}
	sum.State = partsState(n, in.VolumeGroups, in.DeviceClasses, &sum.Message)
	return sum
}

// partsState folds the set's volume groups and device classes on the LVMNode into a node state, and sets
// msg to the first problem.
func partsState(n *lvmv2.LVMNode, vgs, dcs []string, msg *string) lvmv2.State {
	state := lvmv2.StateReady
	worse := func(s lvmv2.State, m string) {
		if rank(s) > rank(state) {
			state = s
			*msg = m
		}
	}
	for _, name := range vgs {
		i := slices.IndexFunc(n.Status.VolumeGroups, func(v lvmv2.VolumeGroupStatus) bool { return v.Name == name })
		if i < 0 {
			worse(lvmv2.StateProgressing, fmt.Sprintf("volume group %s is not reported yet", name))
			continue
		}
		v := n.Status.VolumeGroups[i]
		worse(partToNode(v.State), fmt.Sprintf("volume group %s is %s: %s", name, v.State, firstNonEmpty(v.Message, "no details")))
	}
	for _, name := range dcs {
		i := slices.IndexFunc(n.Status.DeviceClasses, func(d lvmv2.DeviceClassStatus) bool { return d.Name == name })
		if i < 0 {
			worse(lvmv2.StateProgressing, fmt.Sprintf("device class %s is not reported yet", name))
			continue
		}
		d := n.Status.DeviceClasses[i]
		worse(partToNode(d.State), fmt.Sprintf("device class %s is %s: %s", name, d.State, firstNonEmpty(d.Message, "no details")))
	}
	if state == lvmv2.StateReady {
		*msg = ""
	}
	return state
}

func firstPartMessage(n *lvmv2.LVMNode, vgs, dcs []string) string {
	var msg string
	if partsState(n, vgs, dcs, &msg) == lvmv2.StateReady {
		return ""
	}
	return msg
}

// partToNode maps the state of a volume group or device class to a node state.
func partToNode(s lvmv2.State) lvmv2.State {
	switch s {
	case lvmv2.StateHealthy, lvmv2.StateReady:
		return lvmv2.StateReady
	case lvmv2.StateProgressing, "":
		return lvmv2.StateProgressing
	case lvmv2.StateFailed:
		return lvmv2.StateFailed
	case lvmv2.StateMissing:
		return lvmv2.StateDegraded
	default:
		return lvmv2.StateDegraded
	}
}

// rank orders node states from best to worst.
func rank(s lvmv2.State) int {
	switch s {
	case lvmv2.StateReady:
		return 0
	case lvmv2.StateProgressing:
		return 1
	case lvmv2.StateUnknown:
		return 2
	case lvmv2.StateDegraded:
		return 3
	case lvmv2.StateFailed:
		return 4
	}
	return 3
}

func nodeReadyCondition(n *corev1.Node) *corev1.NodeCondition {
	if n == nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// statusInput is everything the set's status is derived from.
type statusInput struct {
	Generation int64
	Deleting   bool
	// DeletionBlockers says what deletion waits for ("" when nothing).
	DeletionBlockers string
	SelectErr        error
	Nodes            []lvmv2.NodeSummary
	// RemovalBlocked is true when a node that left the set keeps its volume groups for volumes on it.
	RemovalBlocked bool
	// Conflicts of the set, as sentences.
	Conflicts []string
	Provider  providerInput
}

// providerInput is what the set's provider (CSI driver side) looks like.
type providerInput struct {
	Unmanaged bool
	// Missing names driver objects that do not exist yet (CSIDriver, node agent DaemonSet).
	Missing []string
	// Taken lists classes whose name someone else uses.
	Taken []string
	// SnapshotsUnavailable is true when thin device classes got no VolumeSnapshotClass.
	SnapshotsUnavailable bool
	Err                  error
	// Unconfined says what is wrong with the admission policies that confine the node agents ("" nothing).
	Unconfined string
}

// setStatus derives the whole status of a set from in. Nodes must be sorted by name.
func setStatus(st *lvmv2.LVMNodeSetStatus, in statusInput) {
	st.ObservedGeneration = in.Generation
	st.Nodes = listedNodes(in.Nodes)
	st.DesiredNodes, st.ReadyNodes = 0, 0
	for _, n := range in.Nodes {
		if n.State == lvmv2.StateDeleting {
			continue
		}
		st.DesiredNodes++
		if n.State == lvmv2.StateReady {
			st.ReadyNodes++
		}
	}
	setNodesReadyCondition(st, in)
	setProviderCondition(st, in)
	setNoConflictsCondition(st, in)
	setState(st, in)
}

// listedNodes is what status.nodes holds: every node while there are at most MaxStatusNodes, else the
// first MaxStatusNodes (by name) of those not Ready.
func listedNodes(nodes []lvmv2.NodeSummary) []lvmv2.NodeSummary {
	if len(nodes) <= MaxStatusNodes {
		return nodes
	}
	var out []lvmv2.NodeSummary
	for _, n := range nodes {
		if n.State != lvmv2.StateReady && len(out) < MaxStatusNodes {
			out = append(out, n)
		}
	}
	return out
}

func setNodesReadyCondition(st *lvmv2.LVMNodeSetStatus, in statusInput) {
	c := metav1.Condition{Type: lvmv2.ConditionLVMNodesReady}
	var notReady, progressing []string
	for _, n := range in.Nodes {
		switch n.State {
		case lvmv2.StateReady, lvmv2.StateDeleting:
		case lvmv2.StateProgressing:
			progressing = append(progressing, n.Name+": "+n.Message)
		default:
			notReady = append(notReady, n.Name+": "+n.Message)
		}
	}
	switch {
	case in.SelectErr != nil:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonInvalidSelector
		c.Message = fmt.Sprintf("spec.nodeSelector is invalid: %v; fix the selector", in.SelectErr)
	case st.DesiredNodes == 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNoNodes
		c.Message = "the node selector and tolerations match no node; label nodes or change spec.nodeSelector"
	case len(notReady) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNodesNotReady
		if in.RemovalBlocked {
			c.Reason = ReasonRemovalBlocked
		}
		c.Message = fmt.Sprintf("%d of %d nodes are not ready: %s", len(notReady), st.DesiredNodes, listSome(notReady, "; "))
	case len(progressing) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNodesProgressing
		c.Message = fmt.Sprintf("%d of %d nodes are being set up: %s", len(progressing), st.DesiredNodes, listSome(progressing, "; "))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonAllReady
		c.Message = fmt.Sprintf("all %d nodes are ready", st.DesiredNodes)
	}
	conditions.Set(&st.Conditions, c, in.Generation, conditionOrder)
}

func setProviderCondition(st *lvmv2.LVMNodeSetStatus, in statusInput) {
	c := metav1.Condition{Type: lvmv2.ConditionProviderReady}
	p := in.Provider
	switch {
	case p.Err != nil:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonProviderError
		c.Message = fmt.Sprintf("generating the CSI driver objects failed: %v", p.Err)
	case len(p.Taken) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonClassTaken
		c.Message = strings.Join(p.Taken, "; ")
	case len(p.Missing) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonProviderMissing
		c.Message = fmt.Sprintf("waiting for %s to be created", strings.Join(p.Missing, " and "))
	case p.Unconfined != "":
		c.Status, c.Reason = metav1.ConditionFalse, ReasonAgentsUnconfined
		c.Message = p.Unconfined + "; LVMS refuses volume moves and new shared volumes until then"
	case p.Unmanaged:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonProviderUnmanaged
		c.Message = "provider strategy Unmanaged: volume groups and lvmd.yaml only, no StorageClasses"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonProviderReady
		c.Message = "the CSI driver, the node agent DaemonSet and the storage classes exist"
		if p.SnapshotsUnavailable {
			c.Message += "; no VolumeSnapshotClass was created because the cluster has no snapshot.storage.k8s.io API"
		}
	}
	conditions.Set(&st.Conditions, c, in.Generation, conditionOrder)
	st.Provider = lvmv2.ProviderStatus{State: lvmv2.StateReady}
	if c.Status != metav1.ConditionTrue {
		st.Provider = lvmv2.ProviderStatus{State: lvmv2.StateProgressing, Message: c.Message}
		if p.Err != nil || len(p.Taken) > 0 {
			st.Provider.State = lvmv2.StateFailed
		} else if c.Reason == ReasonAgentsUnconfined {
			st.Provider.State = lvmv2.StateDegraded // the volumes work; what keeps a node agent to its node does not
		}
	}
}

func setNoConflictsCondition(st *lvmv2.LVMNodeSetStatus, in statusInput) {
	c := metav1.Condition{Type: lvmv2.ConditionNoConflicts, Status: metav1.ConditionTrue, Reason: ReasonNoConflicts,
		Message: "no other LVMNodeSet or LVMCluster claims this set's nodes"}
	if len(in.Conflicts) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonConflict
		c.Message = listSome(in.Conflicts, "; ")
	}
	conditions.Set(&st.Conditions, c, in.Generation, conditionOrder)
}

// setState summarizes the set: Deleting, then Conflict, then Failed (every node failed or the provider
// failed), Degraded (any node not ready), Progressing (nodes being set up) and Ready.
func setState(st *lvmv2.LVMNodeSetStatus, in statusInput) {
	cond := func(t string) *metav1.Condition { return conditions.Get(st.Conditions, t) }
	nodes, provider, conflicts := cond(lvmv2.ConditionLVMNodesReady), cond(lvmv2.ConditionProviderReady), cond(lvmv2.ConditionNoConflicts)
	failedNodes := 0
	for _, n := range in.Nodes {
		if n.State == lvmv2.StateFailed {
			failedNodes++
		}
	}
	switch {
	case in.Deleting:
		st.State = lvmv2.StateDeleting
		st.Message = firstNonEmpty(in.DeletionBlockers, "removing the set's volume groups, LVMNodes and classes")
	case conflicts.Status == metav1.ConditionFalse:
		st.State, st.Message = lvmv2.StateConflict, conflicts.Message
	case provider.Status == metav1.ConditionFalse && st.Provider.State == lvmv2.StateFailed:
		st.State, st.Message = lvmv2.StateFailed, provider.Message
	case nodes.Status == metav1.ConditionFalse && nodes.Reason == ReasonNodesNotReady && failedNodes == int(st.DesiredNodes):
		st.State, st.Message = lvmv2.StateFailed, nodes.Message
	case nodes.Status == metav1.ConditionFalse && nodes.Reason != ReasonNodesProgressing:
		st.State, st.Message = lvmv2.StateDegraded, nodes.Message
	case provider.Status == metav1.ConditionFalse && st.Provider.State == lvmv2.StateDegraded:
		st.State, st.Message = lvmv2.StateDegraded, provider.Message
	case nodes.Status == metav1.ConditionFalse || provider.Status == metav1.ConditionFalse:
		st.State = lvmv2.StateProgressing
		st.Message = firstNonEmpty(falseMessage(nodes), falseMessage(provider))
	default:
		st.State, st.Message = lvmv2.StateReady, ""
	}
}

func falseMessage(c *metav1.Condition) string {
	if c == nil || c.Status == metav1.ConditionTrue {
		return ""
	}
	return c.Message
}

// listSome joins the first maxListed items and says how many more there are.
func listSome(items []string, sep string) string {
	if len(items) <= maxListed {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:maxListed], sep) + fmt.Sprintf("%s and %d more", sep, len(items)-maxListed)
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
