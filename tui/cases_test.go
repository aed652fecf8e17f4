package tui_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

// classWords is what the TUI says of a class check, from the read model's fields.
func classWords(kind string, c *console.ClassCheck) string {
	switch {
	case c.Unknown != "":
		return kind + " " + c.Name + ": cannot be known"
	case !c.Differs:
		return kind + " " + c.Name + ": exists"
	case c.InCluster:
		return "≠ " + kind + " " + c.Name + ": exists but provisions from elsewhere"
	}
	return "≠ " + kind + " " + c.Name + ": missing from the cluster"
}

// The cases the front ends once told differently (issue 41), in the TUI as the read model (the JSON API's
// view, which the web test compares with the pages) has them: class checks with the snapshot API served
// and not, the default class, a v2 node's conditions on their objects, event counts, Pending claims.
func TestCases_TheTUISaysWhatTheReadModelSays(t *testing.T) {
	for _, noSnapshotAPI := range []bool{false, true} {
		snap := console.FromObjects(consoletest.Cases("openshift-storage", consoletest.At), consoletest.At)
		if noSnapshotAPI {
			snap.Hidden = append(snap.Hidden, console.HiddenKind{Resource: "volumesnapshotclasses.snapshot.storage.k8s.io", Reason: "the cluster does not serve the snapshot API"})
		}
		src := console.Static{Snap: snap}
		for _, d := range console.DeviceClasses(snap) {
			screen := run(t, src, 240, 60, ":", "dc", "enter", "/", d.Name, "enter")
			for i, c := range []*console.ClassCheck{d.StorageClass, d.SnapshotClass} {
				if c != nil && !strings.Contains(screen, classWords([]string{"StorageClass", "VolumeSnapshotClass"}[i], c)) {
					t.Errorf("snapshot API unreadable %v, class %s: screen lacks %q:\n%s", noSnapshotAPI, d.Name, classWords([]string{"StorageClass", "VolumeSnapshotClass"}[i], c), screen)
				}
			}
			if got := strings.Contains(screen, "Device class "+d.Name+" ("+d.Strategy+", default)"); got != d.Default {
				t.Errorf("class %s: default on the screen %v, in the read model %v", d.Name, got, d.Default)
			}
		}
		if noSnapshotAPI {
			continue
		}
		v, err := console.Node(snap, consoletest.SandboxNode2)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range v.Conditions {
			if c.Explanation == nil {
				continue // the TUI lists the conditions that need attention
			}
			screen := run(t, src, 240, 60, ":", "node "+consoletest.SandboxNode2, "enter", "/", "condition "+c.Type+" on "+c.Object.Kind, "enter")
			if want := c.Type + " is " + c.Status + " (on " + c.Object.Kind + " " + c.Object.Name + "): " + c.Message; !strings.Contains(screen, want) {
				t.Errorf("screen lacks %q:\n%s", want, screen)
			}
		}
		if screen := run(t, src, 240, 60, ":", "node "+consoletest.SandboxNode2, "enter"); strings.Contains(screen, "no volume group is desired") {
			t.Errorf("the v1 object's 'nothing desired' is shown on a v2 node:\n%s", screen)
		}
		for _, e := range v.Events {
			screen := run(t, src, 240, 60, ":", "ev", "enter", "/", e.Reason, "enter")
			if want := fmt.Sprintf("(%d times)", e.Count); !strings.Contains(screen, want) {
				t.Errorf("event %s: screen lacks %q:\n%s", e.Reason, want, screen)
			}
		}
		for _, vol := range console.Volumes(snap) {
			if vol.PVCPhase != "Pending" {
				continue
			}
			screen := run(t, src, 240, 60, ":", "vol", "enter", "/", vol.PVC, "enter")
			if want := "Claim " + vol.PVC + " has no volume yet"; !strings.Contains(screen, want) || !strings.Contains(screen, vol.Topic.Title) {
				t.Errorf("Pending claim %s: screen lacks %q or %q:\n%s", vol.PVC, want, vol.Topic.Title, screen)
			}
		}
	}
}
