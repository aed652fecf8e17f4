package diff_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/diagnostics/diff"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
)

func has(cs []diff.Change, op, subject, contains string) bool {
	return slices.ContainsFunc(cs, func(c diff.Change) bool {
		all := c.Before + " " + c.After
		for _, f := range c.Fields {
			all += " " + f.Path + " " + f.Before + " " + f.After
		}
		return c.Op == op && c.Subject == subject && strings.Contains(all, contains)
	})
}

func TestCompare(t *testing.T) {
	before := bundletest.Healthy()
	after := bundletest.Healthy()
	after.Manifest.Started = before.Manifest.Started.Add(time.Hour)
	for _, v := range after.Views {
		v.Time = after.Manifest.Started
	}
	n := bundletest.Find[*lvmv2.LVMNode](after, bundletest.NodeB)
	n.Status.State, n.Status.Message = lvmv2.StateDegraded, "/dev/sdb is read-only"
	n.ResourceVersion = "999" // bookkeeping only: not a difference
	g := &n.Status.VolumeGroups[0]
	g.Devices.Included = nil
	g.Devices.Excluded = append(g.Devices.Excluded, lvmv2.ExcludedDevice{KName: "/dev/sdb", Reasons: []string{"/dev/sdb is read-only"}, ReasonCodes: []string{"ReadOnly"}})
	after.Views[bundletest.NodeB].Verdicts[0].Devices[0] = diagnostics.DeviceVerdict{KName: "/dev/sdb", Verdict: diagnostics.VerdictExcluded,
		Reasons: []diagnostics.Reason{{Code: "ReadOnly", Message: "read-only"}}}
	bundletest.Remove[*topolvmv1.LogicalVolume](after, "pvc-0001")

	r := diff.Compare(before.Bundle(t), after.Bundle(t))
	checks := []struct {
		name     string
		changes  []diff.Change
		op       string
		subject  string
		contains string
	}{
		{"node state", r.Nodes, diff.Changed, "node worker-b", "Degraded: /dev/sdb is read-only"},
		{"device state from status", r.Devices, diff.Changed, "worker-b vg1 /dev/sdb", "excluded [ReadOnly]"},
		{"agent verdict", r.Verdicts, diff.Changed, "worker-b vg1 /dev/sdb", "excluded [ReadOnly]"},
		{"object field", r.Objects, diff.Changed, "LVMNode.lvm.topolvm.io lvms/worker-b", `"Degraded"`},
		{"object removed", r.Objects, diff.Removed, "LogicalVolume.topolvm.io pvc-0001", ""},
		{"new finding", r.Findings, diff.Added, "NodeNotReady worker-b LVMNode lvms/worker-b", "fail: Node storage is Degraded"},
	}
	for _, c := range checks {
		if !has(c.changes, c.op, c.subject, c.contains) {
			t.Errorf("%s: no %s %q containing %q in %+v", c.name, c.op, c.subject, c.contains, c.changes)
		}
	}
	for _, c := range r.Objects {
		for _, f := range c.Fields {
			if strings.Contains(f.Path, "resourceVersion") {
				t.Errorf("bookkeeping field listed: %+v", f)
			}
		}
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Nodes (1):", "~ node worker-b", "- LogicalVolume.topolvm.io pvc-0001", "Findings"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCompare_SameBundleIsEmpty(t *testing.T) {
	b := bundletest.Healthy().Bundle(t)
	r := diff.Compare(b, b)
	if !r.Empty() {
		t.Errorf("a bundle differs from itself: %+v", r)
	}
	var out bytes.Buffer
	_ = r.WriteText(&out)
	if !strings.Contains(out.String(), "No differences.") {
		t.Errorf("text = %s", out.String())
	}
}
