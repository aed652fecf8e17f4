package hosttest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/playwright-community/playwright-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/web"
	"github.com/lvms-dev/lvms/web/browsertest"
	"github.com/lvms-dev/lvms/web/plugin"
	"github.com/lvms-dev/lvms/web/plugin/hosttest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

const ns = "lvms-plugin-host"

var prepareOnce sync.Once

// serve starts the LVMS server as the operator runs it (a token required, each caller reading as itself)
// behind the two paths the console gives a plugin, and the host page everywhere else.
func serve(t *testing.T) *httptest.Server {
	t.Helper()
	testenv.Require(t)
	prepareOnce.Do(func() {
		ctx := context.Background()
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		if err := consoletest.Apply(ctx, env.Client, consoletest.PreparedAt(ns, clock.RealClock{}.Now())); err != nil {
			t.Fatal(err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool := live.NewPool(ctx, env.Config, live.Options{Cluster: "envtest"}, 0)
	return host(t, web.NewServer(web.Options{Sources: pool.For, RequireToken: true}))
}

// host serves lvms behind the two paths the console gives a plugin, and the host page everywhere else.
func host(t *testing.T, lvms http.Handler) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	// The console's bridge serves plugin assets from the ConsolePlugin's backend (basePath /plugin/).
	mux.Handle("/api/plugins/"+plugin.Name+"/", http.StripPrefix("/api/plugins/"+plugin.Name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/plugin" + r.URL.Path
		lvms.ServeHTTP(w, r)
	})))
	// The console's plugin proxy (alias "api") forwards the rest of the path with the user's token.
	mux.Handle("/api/proxy/plugin/"+plugin.Name+"/api/", http.StripPrefix("/api/proxy/plugin/"+plugin.Name+"/api", lvms))
	mux.HandleFunc("/host/host.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/javascript")
		_, _ = w.Write(hosttest.HostJS)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><html><head><title>console host</title></head><body><div id="root"></div><script src="/host/host.js"></script></body></html>`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// api reads the JSON API as token, the truth the pages must show.
func api(t *testing.T, srv *httptest.Server, token, path string, into any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/proxy/plugin/"+plugin.Name+"/api/api/v1"+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}

// TestPlugin_OverviewNodeDeviceAndBack loads the plugin into the host in chromium as a viewer, goes from the
// overview to the degraded node and to an excluded device by clicking links, checks each page against the
// JSON API, and goes back with the browser's Back.
func TestPlugin_OverviewNodeDeviceAndBack(t *testing.T) {
	testenv.Require(t)
	srv := serve(t)
	ctx := context.Background()
	viewer, err := consoletest.UserToken(ctx, env.Config, env.Client, ns, "plugin-viewer", live.ViewerRules())
	if err != nil {
		t.Fatal(err)
	}
	var overview console.Overview
	api(t, srv, viewer, "/overview", &overview)
	var node console.NodeView
	api(t, srv, viewer, "/nodes/"+consoletest.NodeB, &node)
	var device console.DeviceView
	api(t, srv, viewer, "/nodes/"+consoletest.NodeB+"/devices/"+url.PathEscape("/dev/sdb"), &device)

	b := browsertest.Chromium(t)
	page, err := b.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	expect := playwright.NewPlaywrightAssertions(20000)
	if _, err := page.Goto(srv.URL + "/lvms?token=" + viewer); err != nil {
		t.Fatal(err)
	}
	visible := func(what string, l playwright.Locator) {
		t.Helper()
		if err := expect.Locator(l).ToBeVisible(); err != nil {
			body, _ := page.Locator("body").InnerText()
			t.Fatalf("%s is not shown: %v\npage:\n%.2000s", what, err, body)
		}
	}
	visible("the overview heading", page.GetByRole("heading", playwright.PageGetByRoleOptions{Name: "LVM Storage"}))
	for _, n := range overview.Nodes {
		visible("node "+n.Name, page.Locator(fmt.Sprintf(`tr[data-node=%q]`, n.Name)))
	}
	for _, o := range overview.Owners {
		visible("owner "+o.Ref.Name, page.Locator(fmt.Sprintf(`tr[data-owner=%q]`, o.Ref.Name)))
	}

	// Overview -> node.
	if err := page.Locator(fmt.Sprintf(`tr[data-node=%q] a`, consoletest.NodeB)).Click(); err != nil {
		t.Fatal(err)
	}
	visible("the node heading", page.GetByRole("heading", playwright.PageGetByRoleOptions{Name: "Node " + consoletest.NodeB}))
	if !strings.HasSuffix(page.URL(), "/lvms/nodes/"+consoletest.NodeB) {
		t.Errorf("node page at %s", page.URL())
	}
	for _, vg := range node.VolumeGroups {
		sec := page.Locator(fmt.Sprintf(`section[data-vg=%q]`, vg.Name))
		visible("volume group "+vg.Name, sec)
		for _, d := range vg.Devices {
			row := sec.Locator(fmt.Sprintf(`tr[data-device=%q]`, d.KName))
			visible(vg.Name+" device "+d.KName, row)
			for _, r := range d.Reasons {
				if err := expect.Locator(row).ToContainText(r.Sentence); err != nil {
					t.Errorf("device %s in %s does not show the reason %q: %v", d.KName, vg.Name, r.Sentence, err)
				}
			}
		}
	}

	// Node -> excluded device (a kernel name with slashes in one URL segment).
	if err := page.Locator(`section[data-vg="scratch"] tr[data-device="/dev/sdb"] a`).Click(); err != nil {
		t.Fatal(err)
	}
	visible("the device heading", page.GetByRole("heading", playwright.PageGetByRoleOptions{Name: "Device /dev/sdb on " + consoletest.NodeB}))
	if !strings.HasSuffix(page.URL(), "/devices/%2Fdev%2Fsdb") {
		t.Errorf("device page at %s", page.URL())
	}
	if len(device.Entries) == 0 {
		t.Fatal("the API shows /dev/sdb in no volume group")
	}
	for _, e := range device.Entries {
		sec := page.Locator(fmt.Sprintf(`section[data-vg=%q]`, e.VolumeGroup))
		visible("/dev/sdb in "+e.VolumeGroup, sec)
		for _, r := range e.Row.Reasons {
			if err := expect.Locator(sec).ToContainText(r.Sentence); err != nil {
				t.Errorf("reason %q: %v", r.Sentence, err)
			}
			if err := expect.Locator(sec).ToContainText(r.Explanation.Title); err != nil {
				t.Errorf("explanation %q: %v", r.Explanation.Title, err)
			}
		}
		for _, v := range e.Verdicts {
			visible("filter "+v.Filter, sec.Locator(fmt.Sprintf(`tr[data-filter=%q]`, v.Filter)))
		}
	}

	// Back twice: the node, then the overview.
	if _, err := page.GoBack(); err != nil {
		t.Fatal(err)
	}
	visible("the node page after Back", page.GetByRole("heading", playwright.PageGetByRoleOptions{Name: "Node " + consoletest.NodeB}))
	if _, err := page.GoBack(); err != nil {
		t.Fatal(err)
	}
	visible("the overview after Back", page.GetByRole("heading", playwright.PageGetByRoleOptions{Name: "LVM Storage"}))

	// The LVMNodeSet details tab lists the set's nodes.
	if _, err := page.Goto(srv.URL + "/k8s/ns/" + ns + "/LVMNodeSet/" + consoletest.SetName + "/lvms"); err != nil {
		t.Fatal(err)
	}
	for _, n := range overview.Nodes {
		for _, o := range n.Owners {
			if o.Kind == "LVMNodeSet" && o.Name == consoletest.SetName {
				visible("set node "+n.Name+" on the tab", page.Locator(fmt.Sprintf(`tr[data-node=%q]`, n.Name)))
			}
		}
	}
}

// A user who may not read LVMS objects sees "Forbidden" on every page, and no node.
func TestPlugin_ForbiddenForAUserWithoutReadAccess(t *testing.T) {
	testenv.Require(t)
	srv := serve(t)
	nobody, err := consoletest.UserToken(context.Background(), env.Config, env.Client, ns, "plugin-nobody", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := browsertest.Chromium(t)
	page, err := b.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	expect := playwright.NewPlaywrightAssertions(20000)
	for _, path := range []string{"/lvms", "/lvms/nodes/" + consoletest.NodeB, "/lvms/nodes/" + consoletest.NodeB + "/devices/%2Fdev%2Fsdb"} {
		if _, err := page.Goto(srv.URL + path + "?token=" + nobody); err != nil {
			t.Fatal(err)
		}
		if err := expect.Locator(page.Locator(`[data-test="forbidden"]`)).ToBeVisible(); err != nil {
			body, _ := page.Locator("body").InnerText()
			t.Errorf("%s: no Forbidden message: %v\n%.1000s", path, err, body)
		}
		if n, _ := page.Locator("tr[data-node], tr[data-device]").Count(); n > 0 {
			t.Errorf("%s: a user without read access sees %d rows", path, n)
		}
	}
}
