package nodeset

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/claims"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// lvmNode builds an LVMNode as the agent left it, with functional options.
func lvmNode(opts ...func(*lvmv2.LVMNode)) *lvmv2.LVMNode {
	n := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 2, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	n.Status = lvmv2.LVMNodeStatus{State: lvmv2.StateReady, ObservedGeneration: 2,
		VolumeGroups:  []lvmv2.VolumeGroupStatus{{Name: "vg1", State: lvmv2.StateHealthy}},
		DeviceClasses: []lvmv2.DeviceClassStatus{{Name: "dc1", VolumeGroup: "vg1", State: lvmv2.StateHealthy}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func neverReported(n *lvmv2.LVMNode) { n.Status = lvmv2.LVMNodeStatus{} }
func created(ago time.Duration) func(*lvmv2.LVMNode) {
	return func(n *lvmv2.LVMNode) { n.CreationTimestamp = metav1.NewTime(now.Add(-ago)) }
}
func nodeState(s lvmv2.State, msg string) func(*lvmv2.LVMNode) {
	return func(n *lvmv2.LVMNode) { n.Status.State, n.Status.Message = s, msg }
}
func vgState(s lvmv2.State, msg string) func(*lvmv2.LVMNode) {
	return func(n *lvmv2.LVMNode) { n.Status.VolumeGroups[0].State, n.Status.VolumeGroups[0].Message = s, msg }
}
func dcState(s lvmv2.State, msg string) func(*lvmv2.LVMNode) {
	return func(n *lvmv2.LVMNode) { n.Status.DeviceClasses[0].State, n.Status.DeviceClasses[0].Message = s, msg }
}
func observed(g int64) func(*lvmv2.LVMNode) {
	return func(n *lvmv2.LVMNode) { n.Status.ObservedGeneration = g }
}

func readyNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
}

func TestSummarizeNode(t *testing.T) {
	notReady := readyNode()
	notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Message: "kubelet stopped posting node status"}}
	tests := []struct {
		name      string
		in        nodeInput
		wantState lvmv2.State
		wantMsg   string
	}{
		{name: "ready", in: nodeInput{Node: readyNode(), LVMNode: lvmNode(), Exclusive: true}, wantState: lvmv2.StateReady},
		{name: "no LVMNode yet", in: nodeInput{Node: readyNode()}, wantState: lvmv2.StateProgressing, wantMsg: "creating the LVMNode"},
		// The LVMNode still holds the previous template and its agent's Ready for it: not the set's Ready.
		{name: "template being applied", in: nodeInput{Node: readyNode(), LVMNode: lvmNode(), Exclusive: true, Applying: true},
			wantState: lvmv2.StateProgressing, wantMsg: "applying the set's template"},
		{name: "template refused", in: nodeInput{Node: readyNode(), LVMNode: lvmNode(), Exclusive: true, Applying: true,
			ApplyErr: errors.New(`admission webhook "x" denied the request`)},
			wantState: lvmv2.StateProgressing, wantMsg: `failed (retrying): admission webhook "x" denied the request`},
		{name: "first report pending", in: nodeInput{Node: readyNode(), LVMNode: lvmNode(neverReported, created(time.Minute))},
			wantState: lvmv2.StateProgressing, wantMsg: "first report"},
		{name: "agent silent past the timeout", in: nodeInput{Name: "n1", Node: readyNode(), LVMNode: lvmNode(neverReported, created(10*time.Minute))},
			wantState: lvmv2.StateUnknown, wantMsg: "the node agent has not reported for 10m0s since the LVMNode was created; check that the lvms-node-agent pod runs on n1"},
		{name: "agent behind the spec", in: nodeInput{Node: readyNode(), LVMNode: lvmNode(observed(1))},
			wantState: lvmv2.StateProgressing, wantMsg: "generation 2, observed 1"},
		{name: "node not ready", in: nodeInput{Name: "n1", Node: notReady, LVMNode: lvmNode()},
			wantState: lvmv2.StateUnknown, wantMsg: "node n1 is not ready (kubelet stopped posting node status)"},
		{name: "agent reports degraded with a reason", in: nodeInput{Node: readyNode(), Exclusive: true,
			LVMNode: lvmNode(nodeState(lvmv2.StateDegraded, "/dev/sdx was not found"))},
			wantState: lvmv2.StateDegraded, wantMsg: "/dev/sdx was not found"},
		{name: "degraded without a node message uses the part's", in: nodeInput{Node: readyNode(), Exclusive: true, VolumeGroups: []string{"vg1"}, DeviceClasses: []string{"dc1"},
			LVMNode: lvmNode(nodeState(lvmv2.StateDegraded, ""), dcState(lvmv2.StateDegraded, "thin-pool target missing"))},
			wantState: lvmv2.StateDegraded, wantMsg: "thin-pool target missing"},
		{name: "shared node: only this set's parts count", in: nodeInput{Node: readyNode(), VolumeGroups: []string{"vg1"}, DeviceClasses: []string{"dc1"},
			LVMNode: lvmNode(nodeState(lvmv2.StateDegraded, "another set's volume group failed"))},
			wantState: lvmv2.StateReady},
		{name: "shared node: a failed part of this set", in: nodeInput{Node: readyNode(), VolumeGroups: []string{"vg1"},
			LVMNode: lvmNode(vgState(lvmv2.StateFailed, "no devices"))},
			wantState: lvmv2.StateFailed, wantMsg: "volume group vg1 is Failed: no devices"},
		{name: "part not reported yet", in: nodeInput{Node: readyNode(), VolumeGroups: []string{"vg2"}, LVMNode: lvmNode()},
			wantState: lvmv2.StateProgressing, wantMsg: "volume group vg2 is not reported yet"},
		{name: "conflict", in: nodeInput{Conflict: &claims.Conflict{Node: "n1", WithKind: claims.KindNodeSet, With: "b", Overlap: "volume group vg1"}},
			wantState: lvmv2.StateConflict, wantMsg: "LVMNodeSet b already manages node n1"},
		{name: "withdrawing", in: nodeInput{Withdrawing: "waiting for the node agent"}, wantState: lvmv2.StateDeleting, wantMsg: "waiting for the node agent"},
		{name: "migration pending", in: nodeInput{Waiting: true}, wantState: lvmv2.StateProgressing, wantMsg: "hand the node over"},
		{name: "Node object gone", in: nodeInput{LVMNode: lvmNode()}, wantState: lvmv2.StateUnknown, wantMsg: "no longer exists"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarizeNode(tc.in, now, 5*time.Minute)
			if got.State != tc.wantState || !strings.Contains(got.Message, tc.wantMsg) {
				t.Errorf("summarizeNode = %s %q, want %s containing %q", got.State, got.Message, tc.wantState, tc.wantMsg)
			}
			if tc.wantState == lvmv2.StateReady && got.Message != "" {
				t.Errorf("a Ready node has message %q", got.Message)
			}
		})
	}
}

func TestSetStatus(t *testing.T) {
	ready := lvmv2.NodeSummary{Name: "a", State: lvmv2.StateReady}
	tests := []struct {
		name      string
		in        statusInput
		wantState lvmv2.State
		wantMsg   string
		wantConds map[string]string // type -> reason
		wantReady int32
		wantNodes int32
	}{
		{name: "all ready", in: statusInput{Nodes: []lvmv2.NodeSummary{ready, {Name: "b", State: lvmv2.StateReady}}},
			wantState: lvmv2.StateReady, wantReady: 2, wantNodes: 2,
			wantConds: map[string]string{lvmv2.ConditionLVMNodesReady: ReasonAllReady, lvmv2.ConditionProviderReady: ReasonProviderReady, lvmv2.ConditionNoConflicts: ReasonNoConflicts}},
		{name: "one bad node degrades the set", in: statusInput{Nodes: []lvmv2.NodeSummary{ready, {Name: "b", State: lvmv2.StateDegraded, Message: "/dev/sdb was not found"}}},
			wantState: lvmv2.StateDegraded, wantMsg: "1 of 2 nodes are not ready: b: /dev/sdb was not found", wantReady: 1, wantNodes: 2,
			wantConds: map[string]string{lvmv2.ConditionLVMNodesReady: ReasonNodesNotReady}},
		{name: "an unknown node degrades too, never stuck progressing", in: statusInput{Nodes: []lvmv2.NodeSummary{ready, {Name: "b", State: lvmv2.StateProgressing, Message: "p"}, {Name: "c", State: lvmv2.StateUnknown, Message: "silent"}}},
			wantState: lvmv2.StateDegraded, wantMsg: "c: silent", wantReady: 1, wantNodes: 3},
		{name: "nodes being set up", in: statusInput{Nodes: []lvmv2.NodeSummary{{Name: "a", State: lvmv2.StateProgressing, Message: "first report"}}},
			wantState: lvmv2.StateProgressing, wantMsg: "1 of 1 nodes are being set up: a: first report", wantNodes: 1,
			wantConds: map[string]string{lvmv2.ConditionLVMNodesReady: ReasonNodesProgressing}},
		{name: "every node failed", in: statusInput{Nodes: []lvmv2.NodeSummary{{Name: "a", State: lvmv2.StateFailed, Message: "x"}}},
			wantState: lvmv2.StateFailed, wantNodes: 1},
		{name: "no nodes", in: statusInput{}, wantState: lvmv2.StateDegraded, wantMsg: "match no node",
			wantConds: map[string]string{lvmv2.ConditionLVMNodesReady: ReasonNoNodes}},
		{name: "invalid selector", in: statusInput{SelectErr: errors.New("bad key")}, wantState: lvmv2.StateDegraded, wantMsg: "spec.nodeSelector is invalid: bad key",
			wantConds: map[string]string{lvmv2.ConditionLVMNodesReady: ReasonInvalidSelector}},
		{name: "conflict wins over health", in: statusInput{Nodes: []lvmv2.NodeSummary{ready}, Conflicts: []string{"LVMNodeSet b also claims node a"}},
			wantState: lvmv2.StateConflict, wantMsg: "LVMNodeSet b also claims node a", wantReady: 1, wantNodes: 1,
			wantConds: map[string]string{lvmv2.ConditionNoConflicts: ReasonConflict}},
		{name: "class name taken fails the provider", in: statusInput{Nodes: []lvmv2.NodeSummary{ready}, Provider: providerInput{Taken: []string{"StorageClass lvms-x already exists"}}},
			wantState: lvmv2.StateFailed, wantMsg: "StorageClass lvms-x already exists", wantReady: 1, wantNodes: 1,
			wantConds: map[string]string{lvmv2.ConditionProviderReady: ReasonClassTaken}},
		{name: "driver objects pending", in: statusInput{Nodes: []lvmv2.NodeSummary{ready}, Provider: providerInput{Missing: []string{"CSIDriver topolvm.io"}}},
			wantState: lvmv2.StateProgressing, wantMsg: "waiting for CSIDriver topolvm.io", wantReady: 1, wantNodes: 1,
			wantConds: map[string]string{lvmv2.ConditionProviderReady: ReasonProviderMissing}},
		{name: "unconfined node agents degrade the set, saying what to apply", in: statusInput{Nodes: []lvmv2.NodeSummary{ready},
			Provider: providerInput{Unconfined: "the admission policy lvms-node-agent-own-node is missing ...; apply deploy/nodeagent/admissionpolicy.yaml"}},
			wantState: lvmv2.StateDegraded, wantMsg: "apply deploy/nodeagent/admissionpolicy.yaml; LVMS refuses volume moves and new shared volumes until then", wantReady: 1, wantNodes: 1,
			wantConds: map[string]string{lvmv2.ConditionProviderReady: ReasonAgentsUnconfined}},
		{name: "unmanaged provider is ready", in: statusInput{Nodes: []lvmv2.NodeSummary{ready}, Provider: providerInput{Unmanaged: true}},
			wantState: lvmv2.StateReady, wantReady: 1, wantNodes: 1,
			wantConds: map[string]string{lvmv2.ConditionProviderReady: ReasonProviderUnmanaged}},
		{name: "deleting with blockers", in: statusInput{Deleting: true, DeletionBlockers: "deletion is blocked by 1 volume(s)", Nodes: []lvmv2.NodeSummary{ready}},
			wantState: lvmv2.StateDeleting, wantMsg: "deletion is blocked by 1 volume(s)", wantReady: 1, wantNodes: 1},
		{name: "withdrawn nodes are not desired", in: statusInput{Nodes: []lvmv2.NodeSummary{ready, {Name: "b", State: lvmv2.StateDeleting, Message: "waiting"}}},
			wantState: lvmv2.StateReady, wantReady: 1, wantNodes: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st lvmv2.LVMNodeSetStatus
			tc.in.Generation = 4
			setStatus(&st, tc.in)
			if st.State != tc.wantState || !strings.Contains(st.Message, tc.wantMsg) {
				t.Errorf("state = %s %q, want %s containing %q", st.State, st.Message, tc.wantState, tc.wantMsg)
			}
			if st.ReadyNodes != tc.wantReady || st.DesiredNodes != tc.wantNodes {
				t.Errorf("ready/desired = %d/%d, want %d/%d", st.ReadyNodes, st.DesiredNodes, tc.wantReady, tc.wantNodes)
			}
			if st.ObservedGeneration != 4 || len(st.Conditions) != 3 {
				t.Errorf("observedGeneration %d, %d conditions", st.ObservedGeneration, len(st.Conditions))
			}
			for i, want := range conditionOrder {
				if st.Conditions[i].Type != want || st.Conditions[i].ObservedGeneration != 4 {
					t.Errorf("condition %d = %s (gen %d), want %s at generation 4", i, st.Conditions[i].Type, st.Conditions[i].ObservedGeneration, want)
				}
			}
			for ct, reason := range tc.wantConds {
				for _, c := range st.Conditions {
					if c.Type == ct && c.Reason != reason {
						t.Errorf("condition %s reason = %s, want %s", ct, c.Reason, reason)
					}
				}
			}
		})
	}
}

func TestAgentPending(t *testing.T) {
	tests := []struct {
		name string
		node *lvmv2.LVMNode
		want string
	}{
		{name: "never reported: nothing to wait for", node: lvmNode(neverReported), want: ""},
		{name: "agent behind", node: lvmNode(observed(1)), want: "act on generation 2"},
		{name: "withdrawn volume group still healthy", node: lvmNode(), want: "removing volume groups vg1"},
		{name: "withdrawn volume group kept because of data", node: lvmNode(vgState(lvmv2.StateFailed, "logical volumes remain")), want: ""},
		{name: "still desired by another set", node: lvmNode(func(n *lvmv2.LVMNode) { n.Spec.VolumeGroups = []lvmv2.VolumeGroup{{Name: "vg1"}} }), want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := agentPending(tc.node)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("agentPending = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSetStatus_LargeSetListsProblemsOnly: up to MaxStatusNodes nodes every node is listed; past it only
// the nodes that are not Ready (at most MaxStatusNodes), while the counts still cover all of them.
func TestSetStatus_LargeSetListsProblemsOnly(t *testing.T) {
	nodes := func(n int, notReady ...int) []lvmv2.NodeSummary {
		var out []lvmv2.NodeSummary
		for i := range n {
			s := lvmv2.NodeSummary{Name: fmt.Sprintf("node-%05d", i), State: lvmv2.StateReady}
			if slices.Contains(notReady, i) {
				s.State, s.Message = lvmv2.StateDegraded, "/dev/sdb was not found"
			}
			out = append(out, s)
		}
		return out
	}
	var st lvmv2.LVMNodeSetStatus
	setStatus(&st, statusInput{Nodes: nodes(MaxStatusNodes, 7)})
	if len(st.Nodes) != MaxStatusNodes || st.DesiredNodes != MaxStatusNodes || st.ReadyNodes != MaxStatusNodes-1 {
		t.Errorf("%d nodes: %d listed, %d/%d ready", MaxStatusNodes, len(st.Nodes), st.ReadyNodes, st.DesiredNodes)
	}
	st = lvmv2.LVMNodeSetStatus{}
	setStatus(&st, statusInput{Nodes: nodes(5000, 3, 4000)})
	if len(st.Nodes) != 2 || st.Nodes[0].Name != "node-00003" || st.Nodes[1].Name != "node-04000" || st.Nodes[1].Message == "" {
		t.Errorf("5000 nodes, 2 not Ready: listed %+v", st.Nodes)
	}
	if st.DesiredNodes != 5000 || st.ReadyNodes != 4998 || st.State != lvmv2.StateDegraded {
		t.Errorf("5000 nodes, 2 not Ready: %d/%d ready, state %s", st.ReadyNodes, st.DesiredNodes, st.State)
	}
	st = lvmv2.LVMNodeSetStatus{}
	all := make([]int, 5000)
	for i := range all {
		all[i] = i
	}
	setStatus(&st, statusInput{Nodes: nodes(5000, all...)})
	if len(st.Nodes) != MaxStatusNodes || st.Nodes[0].Name != "node-00000" || st.ReadyNodes != 0 {
		t.Errorf("5000 nodes none Ready: %d listed from %s, %d ready", len(st.Nodes), st.Nodes[0].Name, st.ReadyNodes)
	}
}
