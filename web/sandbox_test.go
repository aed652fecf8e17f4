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
