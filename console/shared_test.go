package console_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/explain"
)

func sharedNode(t *testing.T, edit func(objs []*lvmv2.LVMNode), name string) *console.NodeView {
	t.Helper()
	objs := consoletest.Shared("lvms")
	var nodes []*lvmv2.LVMNode
	for _, o := range objs {
		if n, ok := o.(*lvmv2.LVMNode); ok {
			nodes = append(nodes, n)
		}
	}
	if edit != nil {
		edit(nodes)
	}
	v, err := console.Node(console.FromObjects(objs, consoletest.At), name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func codes(ds []console.Difference) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Explanation.Code)
	}
	slices.Sort(out)
	return out
}

func TestNode_SharedLocking(t *testing.T) {
	tests := []struct {
		node        string
		wantMode    string
		wantHostID  int32
		wantAlsoOn  []string
		wantHealth  console.Health
		wantCodes   []string
		wantVGTopic string
		wantVG      string // lockspace/initializedBy
	}{
		{consoletest.SharedNodeOK, "Agent", 1, nil, console.HealthOK, nil, "", "Joined/" + consoletest.SharedNodeOK},
		{consoletest.SharedNodeNoWatchdog, "Host", 2, nil, console.HealthWarning, []string{explain.TopicNoWatchdog}, "", "Joined/" + consoletest.SharedNodeOK},
		{consoletest.SharedNodeLUNMissing, "Agent", 3, []string{consoletest.SharedNodeNotRunning}, console.HealthError,
			[]string{explain.TopicHostIDConflict, explain.TopicSharedLUNMissing}, explain.TopicSharedLUNMissing, "NotJoined/"},
		// Not running: the watchdog is not known yet, so no NoWatchdog on top.
		{consoletest.SharedNodeNotRunning, "NotRunning", 3, []string{consoletest.SharedNodeLUNMissing}, console.HealthError,
			[]string{explain.TopicHostIDConflict, explain.TopicLockManagersNotRunning}, "", "NotJoined/"},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			v := sharedNode(t, nil, tc.node)
			sl := v.SharedLocking
			if sl == nil {
				t.Fatal("no shared locking in the view")
			}
			if sl.Mode != tc.wantMode || sl.HostID != tc.wantHostID || !slices.Equal(sl.HostIDAlsoOn, tc.wantAlsoOn) || sl.Health != tc.wantHealth {
				t.Errorf("shared locking = %+v; want mode %s, host ID %d also on %v, health %s", sl, tc.wantMode, tc.wantHostID, tc.wantAlsoOn, tc.wantHealth)
			}
			if got := codes(v.Differences); !slices.Equal(got, tc.wantCodes) {
				t.Errorf("differences %v, want %v", got, tc.wantCodes)
			}
			if v.Health != tc.wantHealth {
				t.Errorf("node health %s, want %s", v.Health, tc.wantHealth)
			}
			g := v.VolumeGroups[0]
			if got := g.Lockspace + "/" + g.InitializedBy; got != tc.wantVG {
				t.Errorf("volume group lockspace/initializedBy = %q, want %q", got, tc.wantVG)
			}
			if topic := ""; g.Topic != nil || tc.wantVGTopic != "" {
				if g.Topic != nil {
					topic = g.Topic.Code
				}
				if topic != tc.wantVGTopic {
					t.Errorf("volume group explained as %q, want %q", topic, tc.wantVGTopic)
				}
			}
		})
	}
}

// The differences say what is wrong in the agent's words and name the other node of a host ID conflict.
func TestNode_SharedLockingDifferencesText(t *testing.T) {
	v := sharedNode(t, nil, consoletest.SharedNodeNotRunning)
	for _, d := range v.Differences {
		switch d.Explanation.Code {
		case explain.TopicLockManagersNotRunning:
			if !strings.Contains(d.Actual, consoletest.NotRunningMessage) || d.Health != console.HealthError {
				t.Errorf("lock managers difference %+v lacks the agent's reason or is not an error", d)
			}
		case explain.TopicHostIDConflict:
			if !strings.Contains(d.Actual, "host ID 3 also on "+consoletest.SharedNodeLUNMissing) ||
				!strings.Contains(d.Explanation.Why, consoletest.SharedNodeLUNMissing+" too") {
				t.Errorf("host ID difference %+v does not name %s", d, consoletest.SharedNodeLUNMissing)
			}
		}
	}
	b := sharedNode(t, nil, consoletest.SharedNodeNoWatchdog)
	if d := b.Differences[0]; d.Actual != consoletest.FencingOff || !strings.Contains(d.Explanation.Why, "not reset") {
		t.Errorf("no-watchdog difference %+v: want the agent's fencing sentence and the consequence", d)
	}
}

// A shared volume group out of its lockspace for another reason than a missing LUN is explained as such.
func TestNode_LockspaceNotJoined(t *testing.T) {
	v := sharedNode(t, func(ns []*lvmv2.LVMNode) {
		for _, n := range ns {
			if n.Name == consoletest.SharedNodeLUNMissing {
				n.Status.VolumeGroups[0].Message = "LUN " + consoletest.SharedLUN + " is not blank: it holds an xfs signature"
			}
		}
	}, consoletest.SharedNodeLUNMissing)
	g := v.VolumeGroups[0]
	if g.Topic == nil || g.Topic.Code != explain.TopicLockspaceNotJoined || !strings.Contains(g.Topic.Why, "is not blank") {
		t.Errorf("volume group explanation = %+v, want LockspaceNotJoined quoting the agent", g.Topic)
	}
}

// Nodes without shared volume groups carry no shared locking, and nothing about it in their JSON.
func TestNode_NoSharedLockingOnLocalNodes(t *testing.T) {
	v, err := console.Node(prepared(), consoletest.NodeA)
	if err != nil {
		t.Fatal(err)
	}
	if v.SharedLocking != nil || v.VolumeGroups[0].Lockspace != "" {
		t.Errorf("node-local node has shared locking %+v / lockspace %q", v.SharedLocking, v.VolumeGroups[0].Lockspace)
	}
	b, _ := json.Marshal(v)
	if strings.Contains(string(b), "sharedLocking") || strings.Contains(string(b), "lockspace") {
		t.Errorf("JSON of a node-local node mentions shared locking: %s", b)
	}
	s := sharedNode(t, nil, consoletest.SharedNodeOK)
	b, _ = json.Marshal(s)
	for _, key := range []string{`"sharedLocking":{"mode":"Agent","hostID":1,"watchdog":true`, `"lockspace":"Joined"`, `"initializedBy":"san-a"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
}

// The agent lists no LUNs of a shared volume group: the named LUN is "unlisted", not a missing device,
// unless the agent says it is not visible; the volume group's explanation covers that, once.
func TestNode_SharedLUNRows(t *testing.T) {
	for node, want := range map[string]console.DeviceState{
		consoletest.SharedNodeOK:         console.DeviceUnlisted,
		consoletest.SharedNodeNotRunning: console.DeviceUnlisted,
		consoletest.SharedNodeLUNMissing: console.DeviceMissing,
	} {
		g := sharedNode(t, nil, node).VolumeGroups[0]
		if len(g.Devices) != 1 || g.Devices[0].KName != consoletest.SharedLUN || g.Devices[0].State != want || g.Devices[0].Differs {
			t.Errorf("%s: LUN rows %+v, want one %s row that is not a difference of its own", node, g.Devices, want)
		}
	}
	d, err := console.Device(console.FromObjects(consoletest.Shared("lvms"), consoletest.At), consoletest.SharedNodeOK, consoletest.SharedLUN)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range d.Entries[0].Verdicts {
		if v.Outcome != console.OutcomeNotEvaluated {
			t.Errorf("filter %s of an unlisted LUN: %s, want not evaluated", v.Code, v.Outcome)
		}
	}
}

// Each node's shared volume group lists the volumes its agent reports active there, by LV name, with their
// lock mode and LogicalVolume.
func TestNode_SharedActiveVolumes(t *testing.T) {
	rwx := console.ActiveVolume{Name: consoletest.SharedVolumeRWXID, Mode: "Shared", LogicalVolume: consoletest.SharedVolumeRWX}
	rwo := console.ActiveVolume{Name: consoletest.SharedVolumeRWOID, Mode: "Exclusive", LogicalVolume: consoletest.SharedVolumeRWO}
	for node, want := range map[string][]console.ActiveVolume{
		consoletest.SharedNodeOK:         {rwx},
		consoletest.SharedNodeNoWatchdog: {rwx, rwo},
		consoletest.SharedNodeLUNMissing: nil,
		consoletest.SharedNodeNotRunning: nil,
	} {
		if got := sharedNode(t, nil, node).VolumeGroups[0].ActiveVolumes; !slices.Equal(got, want) {
			t.Errorf("%s: active volumes %+v, want %+v", node, got, want)
		}
	}
	b, _ := json.Marshal(sharedNode(t, nil, consoletest.SharedNodeOK))
	if key := `"activeVolumes":[{"name":"` + consoletest.SharedVolumeRWXID + `","mode":"Shared","logicalVolume":"` + consoletest.SharedVolumeRWX + `"}]`; !strings.Contains(string(b), key) {
		t.Errorf("JSON lacks %s: %s", key, b)
	}

	// An active volume whose LogicalVolume the snapshot lacks (gone, or not readable) is still listed.
	var objs []client.Object
	for _, o := range consoletest.Shared("lvms") {
		if _, lv := o.(*topolvmv1.LogicalVolume); !lv {
			objs = append(objs, o)
		}
	}
	v, err := console.Node(console.FromObjects(objs, consoletest.At), consoletest.SharedNodeOK)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := v.VolumeGroups[0].ActiveVolumes, []console.ActiveVolume{{Name: consoletest.SharedVolumeRWXID, Mode: "Shared"}}; !slices.Equal(got, want) {
		t.Errorf("without LogicalVolumes: active volumes %+v, want %+v", got, want)
	}
}

// A volume of the shared driver has no node: the volumes list names its volume group and every node whose
// LVMNode reports it active. Node-local volumes carry neither.
func TestVolumes_SharedActiveOn(t *testing.T) {
	objs := append(consoletest.Prepared("lvms"), consoletest.Shared("lvms")...)
	tests := map[string]struct {
		activeOn []console.Activation
		text     string
	}{
		consoletest.SharedVolumeRWX: {[]console.Activation{{Node: consoletest.SharedNodeOK, Mode: "Shared"}, {Node: consoletest.SharedNodeNoWatchdog, Mode: "Shared"}},
			consoletest.SharedNodeOK + " (Shared), " + consoletest.SharedNodeNoWatchdog + " (Shared)"},
		consoletest.SharedVolumeRWO:  {[]console.Activation{{Node: consoletest.SharedNodeNoWatchdog, Mode: "Exclusive"}}, consoletest.SharedNodeNoWatchdog + " (Exclusive)"},
		consoletest.SharedVolumeIdle: {nil, "not active on any node"},
	}
	seen := 0
	for _, v := range console.Volumes(console.FromObjects(objs, consoletest.At)) {
		tc, shared := tests[v.Name]
		if !shared {
			if v.SharedVolumeGroup != "" || v.ActiveOn != nil {
				t.Errorf("node-local volume %s: shared volume group %q, active on %+v", v.Name, v.SharedVolumeGroup, v.ActiveOn)
			}
			continue
		}
		seen++
		if v.Node != "" || v.SharedVolumeGroup != consoletest.SharedVG || v.Health != console.HealthOK {
			t.Errorf("%s: node %q, shared volume group %q, health %s; want no node, %s, ok", v.Name, v.Node, v.SharedVolumeGroup, v.Health, consoletest.SharedVG)
		}
		if !slices.Equal(v.ActiveOn, tc.activeOn) {
			t.Errorf("%s: active on %+v, want %+v", v.Name, v.ActiveOn, tc.activeOn)
		}
		if got := console.ActiveOnText(v.ActiveOn); got != tc.text {
			t.Errorf("%s: active on %q, want %q", v.Name, got, tc.text)
		}
	}
	if seen != len(tests) {
		t.Errorf("%d shared volumes listed, want %d", seen, len(tests))
	}
}
