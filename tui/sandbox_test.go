package tui_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

// The sandbox state (issue 23) in the TUI: node 2's owners in the node list, and each named disk under the
// name the user wrote with its kernel device, as the read model (the JSON API's view) has them.
func TestSandbox_NodeShowsNamedDisksAndOwners(t *testing.T) {
	snap := console.FromObjects(consoletest.Sandbox("openshift-storage", consoletest.At), consoletest.At)
	v, err := console.Node(snap, consoletest.SandboxNode2)
	if err != nil {
		t.Fatal(err)
	}
	src := console.Static{Snap: snap}
	list := run(t, src, 200, 60, "/", consoletest.SandboxNode2, "enter")
	for _, o := range v.Owners {
		if !strings.Contains(list, o.String()) {
			t.Errorf("owner %s is not in the node's summary:\n%s", o, list)
		}
	}
	keys := []string{":", "node " + consoletest.SandboxNode2, "enter"}
	i := 0
	for _, g := range v.VolumeGroups {
		for _, r := range g.Devices {
			screen := run(t, src, 200, 60, keys...)
			keys = append(keys, "j")
			i++
			if r.Path == "" {
				continue
			}
			if want := r.Path + " (" + r.KName + ") in volume group " + g.Name; !strings.Contains(screen, want) {
				t.Errorf("row %d: screen lacks %q:\n%s", i, want, screen)
			}
		}
	}
}

// The TUI's device class detail says what the web page and the JSON API say of a class that cannot
// provision on a node: its state there with why, and that its free space is not usable.
func TestSandbox_ClassThatCannotProvision_DetailSaysWhy(t *testing.T) {
	snap := console.FromObjects(consoletest.Sandbox("openshift-storage", consoletest.At), consoletest.At)
	screen := run(t, console.Static{Snap: snap}, 240, 60, ":", "dc", "enter", "/", "vg1", "enter")
	for _, want := range []string{consoletest.SandboxNode3 + ": Degraded — " + consoletest.SandboxVG1Reason, "2 GiB not usable"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
}

// The TUI names the kind of each class it checks (issue 41 point 8: "lvms-fast: exists" twice, unlabelled)
// and says a thin pool the agent does not report is not reported, instead of an empty usage bar.
func TestSandbox_NodeDetail_LabelsClassesAndUnreportedPools(t *testing.T) {
	snap := console.FromObjects(consoletest.Sandbox("openshift-storage", consoletest.At), consoletest.At)
	src := console.Static{Snap: snap}
	screen := run(t, src, 240, 60, ":", "node "+consoletest.SandboxNode2, "enter", "/", "class fast", "enter")
	// The fixture has neither class (the web and JSON API say so too).
	for _, want := range []string{"≠ StorageClass lvms-fast: missing from the cluster", "≠ VolumeSnapshotClass lvms-fast: missing from the cluster"} {
		if !strings.Contains(screen, want) {
			t.Errorf("class detail lacks %q:\n%s", want, screen)
		}
	}
	screen = run(t, src, 240, 60, ":", "node "+consoletest.SandboxNode2, "enter", "/", "pool pool", "enter")
	if !strings.Contains(screen, "Thin pool pool in vg-thin: not reported by the node agent") || strings.Contains(screen, "Metadata [") {
		t.Errorf("unreported pool's detail:\n%s", screen)
	}
}

// The node summary lists at most four differences and says how many more there are, so the count beside
// the node is never contradicted (issue 41 point 8: it showed 4 of the 5 it counted, silently).
func TestSandbox_NodeSummarySaysHowManyMore(t *testing.T) {
	snap := console.FromObjects(consoletest.Sandbox("openshift-storage", consoletest.At), consoletest.At)
	o := console.BuildOverview(snap)
	var n *console.NodeSummary
	for i := range o.Nodes {
		if o.Nodes[i].Differences > 4 {
			n = &o.Nodes[i]
		}
	}
	if n == nil {
		t.Fatal("no sandbox node has more than four differences")
	}
	screen := run(t, console.Static{Snap: snap}, 240, 60, "/", n.Name)
	if want := fmt.Sprintf("… and %d more: enter shows them all.", n.Differences-4); !strings.Contains(screen, want) {
		t.Errorf("node %s (%d differences): summary lacks %q:\n%s", n.Name, n.Differences, want, screen)
	}
}
