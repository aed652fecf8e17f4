package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
)

// sandboxServer serves the sandbox state of issue 23.
func sandboxServer() (*console.Snapshot, *web.Options) {
	snap := console.FromObjects(consoletest.Sandbox("openshift-storage", consoletest.At), consoletest.At)
	return snap, &web.Options{Sources: web.StaticSources(console.Static{Snap: snap})}
}

// The node pages of the sandbox show what the JSON API says: the owners, and every named disk under the
// name the user wrote with its kernel device, state and reasons.
func TestSandbox_NodePagesAgreeWithTheAPI(t *testing.T) {
	snap, opts := sandboxServer()
	h := web.NewServer(*opts)
	for _, node := range []string{consoletest.SandboxNode2, consoletest.SandboxNode3} {
		v, err := console.Node(snap, node)
		if err != nil {
			t.Fatal(err)
		}
		_, doc := get(t, h, "/nodes/"+node)
		for _, o := range v.Owners {
			if !strings.Contains(doc.Text(), o.String()) {
				t.Errorf("%s: owner %s not on the page", node, o)
			}
		}
		named := 0
		for _, g := range v.VolumeGroups {
			for _, r := range g.Devices {
				sel := fmt.Sprintf(`[data-vg=%q] tr[data-device=%q]`, g.Name, r.KName)
				row := doc.Find(sel)
				if row.Length() != 1 {
					t.Errorf("%s: %d rows for %s", node, row.Length(), sel)
					continue
				}
				if got := row.AttrOr("data-path", ""); got != r.Path {
					t.Errorf("%s %s: path %q on the page, %q in the API", node, r.KName, got, r.Path)
				}
				if r.State == console.DeviceExcluded && (r.Size == nil || !strings.Contains(row.Text(), r.Size.Human)) {
					t.Errorf("%s %s: excluded device without its size (%v) on the page: %q", node, r.KName, r.Size, row.Text())
				}
				if got := row.AttrOr("data-state", ""); got != string(r.State) {
					t.Errorf("%s %s: state %q on the page, %q in the API", node, r.KName, got, r.State)
				}
				for _, rs := range r.Reasons {
					if !strings.Contains(row.Text(), rs.Code) {
						t.Errorf("%s %s: reason %s missing", node, r.KName, rs.Code)
					}
				}
				if r.Path != "" {
					named++
				}
			}
		}
		if named < 2 {
			t.Errorf("%s: %d named disks resolved, want every named disk on its device", node, named)
		}
	}
}

// A device class that cannot provision on a node (vg1 on the sandbox's v1 node) reads the same on the
// Device classes page as in the JSON API: Degraded on that node with why, and its free space not usable
// (issue 41 point 2: it had read Ready with 2 GiB free beside a False DeviceClassesHealthy).
func TestSandbox_ClassThatCannotProvision_SameOnThePageAndInTheAPI(t *testing.T) {
	snap, opts := sandboxServer()
	h := web.NewServer(*opts)
	var vg1 *console.DeviceClassView
	for _, d := range console.DeviceClasses(snap) {
		if d.Name == "vg1" {
			vg1 = &d
		}
	}
	if vg1 == nil || len(vg1.Nodes) != 1 {
		t.Fatalf("device class vg1 = %+v, want it on one node", vg1)
	}
	n := vg1.Nodes[0]
	if n.State != "Degraded" || n.Message != consoletest.SandboxVG1Reason || n.Capacity == nil ||
		n.Capacity.Free.Value != 0 || n.Capacity.Unusable.Value != 2040<<20 {
		t.Fatalf("vg1 on %s = %s %q, capacity %+v; want Degraded with its reason and 2040 MiB not usable", n.Source.Name, n.State, n.Message, n.Capacity)
	}
	if vg1.Capacity.Free.Value != 0 || vg1.Capacity.Unusable.Value != 2040<<20 || vg1.Health == console.HealthOK {
		t.Errorf("vg1 over all nodes: health %s, capacity %+v; want not OK, nothing usable", vg1.Health, vg1.Capacity)
	}
	_, doc := get(t, h, "/deviceclasses")
	panel := doc.Find(`[data-deviceclass="vg1"]`)
	row := panel.Find(`tr[data-node=` + consoletest.SandboxNode3 + `]`)
	if row.AttrOr("data-state", "") != "Degraded" || !strings.Contains(row.Text(), consoletest.SandboxVG1Reason) ||
		!strings.Contains(row.Text(), "2 GiB not usable") {
		t.Errorf("vg1's row for %s on the page: state %q, %q", consoletest.SandboxNode3, row.AttrOr("data-state", ""), row.Text())
	}
	if got := panel.Find(`[data-testid=capacity]`).Text(); !strings.Contains(got, "0 B free, 2 GiB not usable ("+consoletest.SandboxNode3+": "+consoletest.SandboxVG1Reason+")") {
		t.Errorf("vg1's capacity on the page = %q", got)
	}
	_, body, _ := apiGet(t, h, "GET", "/api/v1/deviceclasses")
	for _, it := range body["list"].([]any) {
		d := it.(map[string]any)
		if d["name"] != "vg1" {
			continue
		}
		c := d["capacity"].(map[string]any)
		if c["free"].(map[string]any)["bytes"] != 0.0 || c["unusable"].(map[string]any)["bytes"] != float64(2040<<20) {
			t.Errorf("/api/v1/deviceclasses vg1 capacity = %v", c)
		}
	}
}

// The node page's prose reads as sentences (issue 41 point 8): each per-node object's generations end with
// a period, not " .", and a thin pool the agent does not report shows "not reported" with no empty size
// ("–") beside it.
func TestSandbox_NodePage_ReadsAsSentences(t *testing.T) {
	snap, opts := sandboxServer()
	h := web.NewServer(*opts)
	v, err := console.Node(snap, consoletest.SandboxNode2)
	if err != nil {
		t.Fatal(err)
	}
	_, doc := get(t, h, "/nodes/"+consoletest.SandboxNode2)
	text := strings.Join(strings.Fields(doc.Text()), " ")
	if len(v.Objects) == 0 {
		t.Fatal("node 2 has no per-node objects in the read model")
	}
	for _, o := range v.Objects {
		if want := o.Generations() + "."; !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(text, " .") {
		t.Errorf("page has a space before a period: %q", text[max(0, strings.Index(text, " .")-60):strings.Index(text, " .")+2])
	}
	pool := doc.Find(`[data-testid=thin-pool][data-pool=pool] h3`)
	if got := strings.Join(strings.Fields(pool.Text()), " "); got != "Thin pool pool not reported" {
		t.Errorf("unreported pool's heading = %q, want %q", got, "Thin pool pool not reported")
	}
}
