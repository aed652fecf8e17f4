package browsertest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/web"
	"github.com/lvms-dev/lvms/web/browsertest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

const preparedNS = "lvms-browser"

// clk is the one clock of the prepared state and of what reads it: the real one, because the API server that
// stores the state (and stamps what it creates) runs on it. Times in the state are relative to it, so the
// test gives the same verdict on any date.
var clk clock.PassiveClock = clock.RealClock{}

var (
	prepareOnce sync.Once
	prepareErr  error
)

// prepare writes the prepared state once per control plane: the test plays the operator and node agents.
func prepare(t *testing.T) {
	t.Helper()
	testenv.Require(t)
	prepareOnce.Do(func() {
		ctx := context.Background()
		if prepareErr = env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: preparedNS}}); prepareErr != nil {
			return
		}
		prepareErr = consoletest.Apply(ctx, env.Client, consoletest.PreparedAt(preparedNS, clk.Now()))
	})
	if prepareErr != nil {
		t.Fatalf("write the prepared state: %v", prepareErr)
	}
}

// serve runs the console against the control plane the way `lvms console` does: a live pool with the
// kubeconfig's credentials for requests without a token.
func serve(t *testing.T) *httptest.Server {
	t.Helper()
	testenv.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	pool := live.NewPool(ctx, env.Config, live.Options{Cluster: "envtest", Clock: clk}, 0)
	srv := httptest.NewServer(web.NewServer(web.Options{Sources: pool.For}))
	t.Cleanup(func() { srv.Close(); cancel() })
	return srv
}

// TestBrowser_OverviewToExcludedDevice opens the console in chromium, goes from the overview to the Degraded
// node and to an excluded device, and reads the explanation. It fails when the diff marker of the missing
// device or the explanation text disappears.
func TestBrowser_OverviewToExcludedDevice(t *testing.T) {
	prepare(t)
	srv := serve(t)
	b := browsertest.Chromium(t)
	page, err := b.NewPage(playwright.BrowserNewPageOptions{Viewport: &playwright.Size{Width: 1400, Height: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	expect := playwright.NewPlaywrightAssertions(15000)
	shots := browsertest.ArtifactDir(t)
	shot := func(name string) {
		p := filepath.Join(shots, name)
		if _, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(p), FullPage: playwright.Bool(true)}); err != nil {
			t.Errorf("screenshot %s: %v", p, err)
			return
		}
		t.Logf("screenshot: %s", p)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			shot("failure.png")
			t.Fatal(err)
		}
	}

	_, err = page.Goto(srv.URL + "/")
	must(err)
	nodeRows := page.GetByTestId("node-row")
	must(expect.Locator(nodeRows).ToHaveCount(3))
	must(expect.Locator(page.Locator(`[data-testid="node-row"][data-node="worker-b"] [data-testid="diff-marker"]`)).ToBeVisible())
	shot("overview.png")

	must(page.Locator(`[data-testid="node-row"][data-node="worker-b"] [data-testid="node-link"]`).Click())
	must(expect.Page(page).ToHaveURL(srv.URL + "/nodes/worker-b"))
	missing := page.Locator(`[data-testid="vg"][data-vg="vg1"] [data-testid="device-row"][data-device="/dev/nvme1n1"]`)
	must(expect.Locator(missing).ToHaveAttribute("data-state", "missing"))
	must(expect.Locator(missing.GetByTestId("diff-marker")).ToHaveText("≠ differs"))
	must(expect.Locator(page.GetByTestId("node-state")).ToHaveText("Degraded"))
	shot("node-worker-b.png")

	must(page.Locator(`[data-testid="vg"][data-vg="scratch"] [data-testid="device-row"][data-device="/dev/sdb"] [data-testid="device-link"]`).Click())
	must(expect.Page(page).ToHaveURL(srv.URL + "/nodes/worker-b/devices/sdb"))
	foreign := page.Locator(`[data-testid="reason"][data-code="ForeignSignature"]`)
	must(expect.Locator(foreign.GetByTestId("agent-sentence")).ToContainText("/dev/sdb has an invalid filesystem signature (xfs)"))
	must(expect.Locator(foreign.GetByTestId("explanation-why")).ToContainText("LVMS only uses empty devices, so it never overwrites data it did not put there."))
	must(expect.Locator(foreign.GetByTestId("destructive-warning")).ToContainText("Wiping destroys every byte of data on /dev/sdb"))
	must(expect.Locator(page.Locator(`[data-testid="reason"][data-code="Mounted"] [data-testid="explanation-title"]`)).ToHaveText("Device is mounted or used as swap"))
	shot("device-sdb.png")

	// The way back: the breadcrumb returns to the node.
	must(page.Locator(`.crumbs [data-testid="node-link"]`).Click())
	must(expect.Page(page).ToHaveURL(srv.URL + "/nodes/worker-b"))

	// The dark theme, for a person to look at.
	must(page.EmulateMedia(playwright.PageEmulateMediaOptions{ColorScheme: playwright.ColorSchemeDark}))
	shot("node-worker-b-dark.png")
}

// refreshNode creates an LVMNode with a first status, as a node agent would, and returns a function that
// writes a new status.
func refreshNode(t *testing.T, name string) func(state lvmv2.State, message string) {
	t.Helper()
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	n := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, n) })
	set := func(state lvmv2.State, message string) {
		t.Helper()
		n.Status = lvmv2.LVMNodeStatus{State: state, Message: message}
		if err := env.Client.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	set(lvmv2.StateReady, "first status")
	return set
}

// TestLiveRefresh_Handler: after the test changes an LVMNode's status, the served page shows it.
func TestLiveRefresh_Handler(t *testing.T) {
	set := refreshNode(t, "handler-node")
	srv := serve(t)
	waitFor(t, srv.URL+"/nodes/handler-node", "first status")
	set(lvmv2.StateDegraded, "changed by the node agent")
	waitFor(t, srv.URL+"/nodes/handler-node", "changed by the node agent")
	waitFor(t, srv.URL+"/api/v1/nodes/handler-node", `"message":"changed by the node agent"`)
}

// TestBrowser_LiveRefresh: with a node page open in chromium, the test changes the LVMNode's status and the
// open page shows the change by itself (htmx polling).
func TestBrowser_LiveRefresh(t *testing.T) {
	set := refreshNode(t, "browser-node")
	srv := serve(t)
	b := browsertest.Chromium(t)
	page, err := b.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := page.Goto(srv.URL + "/nodes/browser-node"); err != nil {
		t.Fatal(err)
	}
	expect := playwright.NewPlaywrightAssertions(30000)
	if err := expect.Locator(page.GetByTestId("node-message")).ToHaveText("first status"); err != nil {
		t.Fatal(err)
	}
	set(lvmv2.StateDegraded, "changed by the node agent")
	if err := expect.Locator(page.GetByTestId("node-message")).ToHaveText("changed by the node agent"); err != nil {
		t.Fatalf("the open page did not refresh itself: %v", err)
	}
	if err := expect.Locator(page.GetByTestId("node-state")).ToHaveText("Degraded"); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls a page until its HTML contains want (a generous 30s: no timing assertion).
func waitFor(t *testing.T, url, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			last = string(b)
			if strings.Contains(last, want) {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s never contained %q; last answer: %.300s", url, want, last)
}
