package tui_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

// The node screen has a row per group snapshot with its phase; its detail pane names the
// VolumeGroupSnapshot, the member count and suspend time, every member with its source, claim, size and
// readiness, and a failed group's reason and message.
func TestNodeGroupSnapshots(t *testing.T) {
	snap := console.FromObjects(consoletest.GroupSnapshots("lvms"), consoletest.At)
	keys := func(s ...string) []string {
		var out []string
		for _, k := range s {
			if len(k) > 1 && k != "enter" {
				for _, r := range k {
					out = append(out, string(r))
				}
				continue
			}
			out = append(out, k)
		}
		return out
	}
	tests := []struct {
		name string
		keys []string
		want []string
	}{
		{name: "ready", keys: keys(":", "node "+consoletest.NodeA, "enter", "/", consoletest.GroupReady, "enter"), want: []string{
			"group snapshot " + consoletest.GroupReady, "Ready", "VolumeGroupSnapshot lvms/" + consoletest.GroupVGS,
			"2 members, 1 ready", "suspended together for " + consoletest.GroupSuspend.String(),
			consoletest.GroupMemberA + " ← pvc-0a1 (claim lvms/data-db-0), 10 GiB, ready",
			consoletest.GroupMemberB + " ← " + consoletest.GroupSourceB + ", 10 GiB, not ready"}},
		{name: "failed", keys: keys(":", "node "+consoletest.NodeA, "enter", "/", consoletest.GroupFailed, "enter"), want: []string{
			"≠ group snapshot " + consoletest.GroupFailed, "Failed", consoletest.GroupFailReason + ": the origins stayed suspended",
			"no LogicalVolume"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := run(t, console.Static{Snap: snap}, 220, 40, tc.keys...)
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
		})
	}
}

// The volumes screen's detail pane shows a claim's move: phase, target node, progress and the command
// that confirms it.
func TestVolumeMoveStatus(t *testing.T) {
	objs := consoletest.Prepared("lvms")
	for _, o := range objs {
		if c, ok := o.(*corev1.PersistentVolumeClaim); ok {
			c.Annotations = map[string]string{move.AnnotationStatus: `{"id":"abc123","phase":"AwaitingConfirmation","targetNode":"worker-b","message":"the claim uses the new volume"}`}
		}
	}
	snap := console.FromObjects(objs, consoletest.At)
	var keys []string
	for _, r := range ":volumes" {
		keys = append(keys, string(r))
	}
	keys = append(keys, "enter", "/", "p", "v", "c", "-", "0", "a", "1", "enter")
	s := run(t, console.Static{Snap: snap}, 220, 40, keys...)
	for _, w := range []string{"Move abc123: AwaitingConfirmation to worker-b", "the claim uses the new volume",
		"lvms move confirm data-db-0 -n lvms --id abc123"} {
		if !strings.Contains(s, w) {
			t.Errorf("screen lacks %q:\n%s", w, s)
		}
	}
}
