package lvmcluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func nodeStatus(node string, vgs ...lvmv1.VGStatus) nodeStatusInput {
	return nodeStatusInput{Node: node, Status: &lvmv1.LVMVolumeGroupNodeStatus{
		ObjectMeta: metav1.ObjectMeta{Name: node, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec:       lvmv1.LVMVolumeGroupNodeStatusSpec{LVMVGStatus: vgs},
	}}
}

func vg(name string, st lvmv1.VGStatusType, reason string) lvmv1.VGStatus {
	return lvmv1.VGStatus{Name: name, Status: st, Reason: reason}
}

func TestSetStatus(t *testing.T) {
	twoNodes := []classInput{{Name: "vg1", Nodes: []string{"a", "b"}}}
	tests := []struct {
		name       string
		in         statusInput
		wantState  lvmv1.LVMStateType
		wantMsg    string
		wantReason map[string]string
	}{
		{name: "ready", in: statusInput{Classes: twoNodes, NodeStatuses: []nodeStatusInput{
			nodeStatus("a", vg("vg1", lvmv1.VGStatusReady, "")), nodeStatus("b", vg("vg1", lvmv1.VGStatusReady, ""))}},
			wantState: lvmv1.LVMStatusReady, wantReason: map[string]string{ConditionVolumeGroupsReady: ReasonVGsReady, ConditionResourcesAvailable: ReasonResourcesAvailable}},
		{name: "waiting for agents", in: statusInput{Classes: twoNodes, NodeStatuses: []nodeStatusInput{nodeStatus("a", vg("vg1", lvmv1.VGStatusReady, "")), {Node: "b"}}},
			wantState: lvmv1.LVMStatusProgressing, wantMsg: "1 of 2 volume groups are ready", wantReason: map[string]string{ConditionVolumeGroupsReady: ReasonVGsInProgress}},
		{name: "one failed node degrades", in: statusInput{Classes: twoNodes, NodeStatuses: []nodeStatusInput{
			nodeStatus("a", vg("vg1", lvmv1.VGStatusReady, "")), nodeStatus("b", vg("vg1", lvmv1.VGStatusFailed, "/dev/sdx not found"))}},
			wantState: lvmv1.LVMStatusDegraded, wantMsg: "vg1 on b: /dev/sdx not found", wantReason: map[string]string{ConditionVolumeGroupsReady: ReasonVGsDegraded}},
		{name: "all failed fails", in: statusInput{Classes: []classInput{{Name: "vg1", Nodes: []string{"a"}}}, NodeStatuses: []nodeStatusInput{nodeStatus("a", vg("vg1", lvmv1.VGStatusFailed, "no devices"))}},
			wantState: lvmv1.LVMStatusFailed, wantMsg: "every volume group failed: vg1 on a: no devices", wantReason: map[string]string{ConditionVolumeGroupsReady: ReasonVGsFailed}},
		{name: "silent agent past the timeout degrades", in: statusInput{Now: now, ReportTimeout: time.Minute, Classes: []classInput{{Name: "vg1", Nodes: []string{"a"}}}, NodeStatuses: []nodeStatusInput{nodeStatus("a")}},
			wantState: lvmv1.LVMStatusDegraded, wantMsg: "vg1 on a: the node agent has not reported for 1h0m0s"},
		{name: "class without nodes", in: statusInput{Classes: []classInput{{Name: "vg1"}}},
			wantState: lvmv1.LVMStatusDegraded, wantMsg: "device classes vg1 select no node", wantReason: map[string]string{ConditionVolumeGroupsReady: ReasonNoNodes}},
		{name: "apply error fails", in: statusInput{ApplyErr: errors.New("boom"), Classes: twoNodes, NodeStatuses: []nodeStatusInput{
			nodeStatus("a", vg("vg1", lvmv1.VGStatusReady, "")), nodeStatus("b", vg("vg1", lvmv1.VGStatusReady, ""))}},
			wantState: lvmv1.LVMStatusFailed, wantMsg: "Resources have not yet been fully synced to the cluster: boom", wantReason: map[string]string{ConditionResourcesAvailable: ReasonResourcesIncomplete}},
		{name: "unconfined node agents degrade, saying what to apply", in: statusInput{Unconfined: "the admission policy lvms-node-agent-own-node is missing ...; apply deploy/nodeagent/admissionpolicy.yaml", Classes: twoNodes, NodeStatuses: []nodeStatusInput{
			nodeStatus("a", vg("vg1", lvmv1.VGStatusReady, "")), nodeStatus("b", vg("vg1", lvmv1.VGStatusReady, ""))}},
			wantState: lvmv1.LVMStatusDegraded, wantMsg: "apply deploy/nodeagent/admissionpolicy.yaml; LVMS refuses volume moves and new shared volumes until then",
			wantReason: map[string]string{ConditionResourcesAvailable: ReasonAgentsUnconfined, ConditionVolumeGroupsReady: ReasonVGsReady}},
		{name: "conflict degrades", in: statusInput{Conflicts: []string{"LVMNodeSet s also claims node a"}, Classes: []classInput{{Name: "vg1", Nodes: []string{"a"}}}, NodeStatuses: []nodeStatusInput{nodeStatus("a", vg("vg1", lvmv1.VGStatusReady, ""))}},
			wantState: lvmv1.LVMStatusDegraded, wantMsg: "LVMNodeSet s also claims node a", wantReason: map[string]string{ConditionNoConflicts: ReasonConflict}},
		{name: "refused", in: statusInput{RefusedBy: "first"}, wantState: lvmv1.LVMStatusFailed, wantMsg: "LVMCluster first is the one managed here",
			wantReason: map[string]string{ConditionResourcesAvailable: ReasonMultipleClusters}},
		{name: "deletion blocked", in: statusInput{Deleting: true, DeletionBlockers: "deletion is blocked by 1 volume(s)"},
			wantState: lvmv1.LVMStatusProgressing, wantMsg: "deleting: deletion is blocked by 1 volume(s)", wantReason: map[string]string{ConditionResourcesAvailable: ReasonDeletionPending}},
		{name: "external configuration reported", in: statusInput{External: true, NodeStatuses: []nodeStatusInput{nodeStatus("a", vg("rhel", lvmv1.VGStatusReady, ""))}},
			wantState: lvmv1.LVMStatusReady, wantReason: map[string]string{ConditionVolumeGroupsReady: ReasonVGsUnmanaged}},
		{name: "external configuration with a bad host file", in: statusInput{External: true, NodeStatuses: []nodeStatusInput{nodeStatus("a", vg("rhel", lvmv1.VGStatusFailed, "volume group rhel does not exist"))}},
			wantState: lvmv1.LVMStatusDegraded, wantMsg: "rhel on a: volume group rhel does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st lvmv1.LVMClusterStatus
			tc.in.Generation = 3
			setStatus(&st, tc.in)
			if st.State != tc.wantState || !strings.Contains(st.Message, tc.wantMsg) {
				t.Errorf("state = %s %q, want %s containing %q", st.State, st.Message, tc.wantState, tc.wantMsg)
			}
			if st.Ready != (tc.wantState == lvmv1.LVMStatusReady) {
				t.Errorf("ready = %v with state %s", st.Ready, st.State)
			}
			for ct, reason := range tc.wantReason {
				found := false
				for _, c := range st.Conditions {
					if c.Type == ct {
						found = true
						if c.Reason != reason || c.ObservedGeneration != 3 {
							t.Errorf("condition %s = %s (gen %d), want %s at 3", ct, c.Reason, c.ObservedGeneration, reason)
						}
					}
				}
				if !found {
					t.Errorf("condition %s missing", ct)
				}
			}
		})
	}
}

func TestDeviceClassStatuses_FollowSpecAndNodeOrder(t *testing.T) {
	in := statusInput{
		Classes:      []classInput{{Name: "z", Nodes: []string{"a", "b"}}, {Name: "y", Nodes: []string{"b"}}},
		NodeStatuses: []nodeStatusInput{nodeStatus("a", vg("z", lvmv1.VGStatusReady, "")), nodeStatus("b", vg("y", lvmv1.VGStatusReady, ""), vg("z", lvmv1.VGStatusDegraded, "x"))},
	}
	got := deviceClassStatuses(in)
	if len(got) != 2 || got[0].Name != "z" || got[1].Name != "y" {
		t.Fatalf("device classes = %+v, want z then y (spec order)", got)
	}
	if n := got[0].NodeStatus; len(n) != 2 || n[0].Node != "a" || n[1].Node != "b" || n[1].Status != lvmv1.VGStatusDegraded || n[1].Reason != "x" {
		t.Errorf("z nodes = %+v", n)
	}
}
