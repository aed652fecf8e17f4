package tui_test

import (
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

// The node screen of a node with a shared volume group starts with its lock managers and the volume
// group's lockspace; the detail pane says what is wrong and what to do.
func TestNodeSharedLocking(t *testing.T) {
	snap := console.FromObjects(consoletest.Shared("lvms"), consoletest.At)
	tests := []struct {
		node string
		keys []string
		want []string
	}{
		{node: consoletest.SharedNodeNoWatchdog, want: []string{"shared locking", "run by the host", "shared lockspace", "joined",
			"Host ID: 2", "Watchdog: none", "WARNING: no watchdog", "No watchdog: no fencing."}},
		{node: consoletest.SharedNodeNotRunning, want: []string{"≠ shared locking", "not running", "Host ID: ≠ 3, also reported by san-c",
			"Agent: \"" + consoletest.NotRunningMessage + "\"", "Lock managers not running.", "Host ID used by two nodes."}},
		// The second row: the lockspace of the volume group whose LUN is missing, with its explanation.
		{node: consoletest.SharedNodeLUNMissing, keys: []string{"j"}, want: []string{"≠ shared lockspace", "not joined",
			"Initialized by: not known yet", "Volumes active on this node: none", "Shared LUN not visible on the node.", "multipath -ll"}},
		{node: consoletest.SharedNodeOK, keys: []string{"j"}, want: []string{"Initialized by: san-a", "lockspace joined",
			"Volumes active on this node:", consoletest.SharedVolumeRWX + " (Shared), LV " + consoletest.SharedVolumeRWXID}},
		// Every volume active on the node, by its LogicalVolume, with its mode and LV name.
		{node: consoletest.SharedNodeNoWatchdog, keys: []string{"j"}, want: []string{"Volumes active on this node:",
			consoletest.SharedVolumeRWX + " (Shared), LV " + consoletest.SharedVolumeRWXID,
			consoletest.SharedVolumeRWO + " (Exclusive), LV " + consoletest.SharedVolumeRWOID}},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			keys := []string{":"}
			for _, r := range "node " + tc.node {
				keys = append(keys, string(r))
			}
			keys = append(append(keys, "enter"), tc.keys...)
			s := run(t, console.Static{Snap: snap}, 200, 40, keys...)
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
		})
	}
}

// A node without shared volume groups has no shared rows.
func TestNodeWithoutSharedLocking(t *testing.T) {
	s := run(t, console.Static{Snap: prepared()}, 200, 40, ":", "n", "o", "d", "e", " ", "w", "o", "r", "k", "e", "r", "-", "a", "enter")
	if strings.Contains(s, "shared locking") || strings.Contains(s, "lockspace") {
		t.Errorf("node-local node shows shared rows:\n%s", s)
	}
}

// The volumes list says where a volume of the shared driver is active instead of a node; its detail pane
// names its volume group and every node with the mode.
func TestVolumesSharedActiveOn(t *testing.T) {
	snap := console.FromObjects(consoletest.Shared("lvms"), consoletest.At)
	tests := []struct {
		name string
		keys []string
		want []string
	}{
		{name: "list", want: []string{"volumes (3)", "shared, on 2 nodes", "shared, on " + consoletest.SharedNodeNoWatchdog, "shared, not active",
			"LogicalVolume " + consoletest.SharedVolumeRWX + " in shared volume group " + consoletest.SharedVG,
			"Active on: " + consoletest.SharedNodeOK + " (Shared), " + consoletest.SharedNodeNoWatchdog + " (Shared)"}},
		{name: "exclusive", keys: []string{"j"}, want: []string{"Active on: " + consoletest.SharedNodeNoWatchdog + " (Exclusive)"}},
		{name: "idle", keys: []string{"j", "j"}, want: []string{"Active on: not active on any node"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := []string{":"}
			for _, r := range "volumes" {
				keys = append(keys, string(r))
			}
			s := run(t, console.Static{Snap: snap}, 200, 40, append(append(keys, "enter"), tc.keys...)...)
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
		})
	}
}
