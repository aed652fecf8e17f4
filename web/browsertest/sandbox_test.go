package browsertest_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
	"github.com/lvms-dev/lvms/web/browsertest"
)

// sandboxPage serves the sandbox state (issue 23) and opens a chromium page for it.
func sandboxPage(t *testing.T) (*console.Snapshot, *httptest.Server, playwright.Page) {
	t.Helper()
	snap := console.FromObjects(consoletest.Sandbox("openshift-storage", consoletest.At), consoletest.At)
	srv := httptest.NewServer(web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap})}))
	t.Cleanup(srv.Close)
	page, err := browsertest.Chromium(t).NewPage()
	if err != nil {
		t.Fatal(err)
	}
	return snap, srv, page
}

// In chromium, nodes 2 and 3 of the sandbox state (issue 23) show each named disk with its kernel device,
// state and reasons, and the sets and clusters that really select them.
func TestBrowser_SandboxNamedDisksAndOwners(t *testing.T) {
	snap, srv, page := sandboxPage(t)
	expect := playwright.NewPlaywrightAssertions(15000)
	for _, node := range []string{consoletest.SandboxNode2, consoletest.SandboxNode3} {
		v, err := console.Node(snap, node)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := page.Goto(srv.URL + "/nodes/" + node); err != nil {
			t.Fatal(err)
		}
		for _, o := range v.Owners {
			if err := expect.Locator(page.Locator(`[data-testid="node-page"]`)).ToContainText(o.String()); err != nil {
				t.Errorf("%s: owner %s: %v", node, o, err)
			}
		}
		for _, g := range v.VolumeGroups {
			for _, r := range g.Devices {
				if r.Path == "" {
					continue
				}
				row := page.Locator(fmt.Sprintf(`[data-vg=%q] tr[data-path=%q]`, g.Name, r.Path))
				if err := expect.Locator(row).ToBeVisible(); err != nil {
					t.Errorf("%s: no row for %s: %v", node, r.Path, err)
					continue
				}
				if err := expect.Locator(row.Locator(`[data-testid="device-link"]`)).ToHaveText(r.KName); err != nil {
					t.Errorf("%s: %s is not shown on %s: %v", node, r.Path, r.KName, err)
				}
				if err := expect.Locator(row).ToHaveAttribute("data-state", string(r.State)); err != nil {
					t.Errorf("%s: %s state: %v", node, r.Path, err)
				}
				for _, rs := range r.Reasons {
					if err := expect.Locator(row).ToContainText(rs.Code); err != nil {
						t.Errorf("%s: %s reason %s: %v", node, r.Path, rs.Code, err)
					}
				}
			}
		}
	}
}

// A node name is never broken across lines at its hyphens (issue 41 point 8: "lvms-local-" above "3" in a
// narrow table): on a phone-wide window every node link on the overview and the Device classes page is one
// line box.
func TestBrowser_NodeNamesAreNotBroken(t *testing.T) {
	_, srv, page := sandboxPage(t)
	if err := page.SetViewportSize(420, 900); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/deviceclasses"} {
		if _, err := page.Goto(srv.URL + path); err != nil {
			t.Fatal(err)
		}
		links, err := page.Locator(`a[href^="/nodes/"]:not([data-testid="hide-diff"])`).All()
		if err != nil {
			t.Fatal(err)
		}
		if len(links) == 0 {
			t.Fatalf("%s: no node link", path)
		}
		for _, l := range links {
			lines, err := l.Evaluate("e => e.getClientRects().length", nil)
			if err != nil {
				t.Fatal(err)
			}
			if text, _ := l.TextContent(); lines != 1 {
				t.Errorf("%s: node link %q is laid out on %v lines", path, text, lines)
			}
		}
	}
}
