package browsertest_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	rbacv1 "k8s.io/api/rbac/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/migrate/migratetest"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/operator/optest"
	"github.com/lvms-dev/lvms/web"
	"github.com/lvms-dev/lvms/web/browsertest"
)

// serveWizard runs the console with the migration wizard as `lvms console` does.
func serveWizard(t *testing.T) *httptest.Server {
	t.Helper()
	testenv.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	pool := live.NewPool(ctx, env.Config, live.Options{Cluster: "envtest", Clock: clk}, 0)
	runner := wizard.NewRunner(ctx, nil)
	runner.Poll = 100 * time.Millisecond
	srv := httptest.NewServer(web.NewServer(web.Options{Sources: pool.For, Migration: &web.Migration{Clients: pool.Client, Runner: runner}}))
	t.Cleanup(func() { srv.Close(); cancel() })
	return srv
}

// TestBrowser_MigrationWizard walks the wizard in chromium against a real API server with the operator and
// fake node agents: an admin plans, runs preflight, applies (the page follows each node's hand-over live)
// and verifies; a user who may only read sees every write step disabled and the permissions it lacks named.
func TestBrowser_MigrationWizard(t *testing.T) {
	testenv.Require(t)
	prepare(t) // another LVMCluster beside the migrated one, whatever ran before
	f := migratetest.New(t, env, optest.V1Ready)
	srv := serveWizard(t)
	b := browsertest.Chromium(t)
	shots := browsertest.ArtifactDir(t)
	expect := playwright.NewPlaywrightAssertions(15000)
	slow := playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(float64(optest.DefaultTimeout.Milliseconds()))}
	wizardURL := srv.URL + "/migration/" + f.NS + "/" + migratetest.ClusterName

	t.Run("a reader lacking permissions", func(t *testing.T) {
		token, err := consoletest.UserToken(context.Background(), env.Config, f.C, f.NS, "reader", []rbacv1.PolicyRule{
			{APIGroups: []string{lvmv1.GroupVersion.Group}, Resources: []string{"lvmclusters"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"list"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		bctx, err := b.NewContext(playwright.BrowserNewContextOptions{ExtraHttpHeaders: map[string]string{"Authorization": "Bearer " + token}})
		if err != nil {
			t.Fatal(err)
		}
		page, err := bctx.NewPage()
		if err != nil {
			t.Fatal(err)
		}
		must := mustFor(t, page, shots)
		_, err = page.Goto(wizardURL)
		must(err)
		must(expect.Locator(page.GetByTestId("plan-report")).ToContainText("my-lvmcluster"))
		pre := page.Locator(`[data-testid="step"][data-step="preflight"]`)
		must(expect.Locator(pre).ToHaveAttribute("data-enabled", "false"))
		must(expect.Locator(pre.GetByTestId("step-button")).ToBeDisabled())
		must(expect.Locator(pre.GetByTestId("missing-permission").Filter(playwright.LocatorFilterOptions{
			HasText: "patch lvmclusters.lvm.topolvm.io in namespace " + f.NS})).ToHaveCount(1))
		must(expect.Locator(pre.GetByTestId("missing-permission").Filter(playwright.LocatorFilterOptions{
			HasText: "create lvmnodesets.lvm.topolvm.io in namespace " + f.NS})).ToHaveCount(1))
		must(expect.Locator(page.Locator(`[data-testid="step"][data-step="apply"] [data-testid="step-button"]`)).ToBeDisabled())
		shot(t, page, shots, "reader.png")
	})

	t.Run("an admin walks it end to end", func(t *testing.T) {
		page, err := b.NewPage(playwright.BrowserNewPageOptions{Viewport: &playwright.Size{Width: 1400, Height: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		must := mustFor(t, page, shots)
		_, err = page.Goto(srv.URL + "/")
		must(err)
		must(page.Locator(`nav a[href="/migration"]`).Click())
		// The prepared state has an LVMCluster too: the index lists both, ours is picked.
		must(page.Locator(`[data-testid="migration-target"] a[href="/migration/` + f.NS + `/` + migratetest.ClusterName + `"]`).Click())
		must(expect.Page(page).ToHaveURL(wizardURL))
		must(expect.Locator(page.GetByTestId("migration-status")).ToContainText("Not started"))
		must(expect.Locator(page.Locator(`[data-step="apply"] [data-testid="step-why"]`)).ToContainText("run preflight first"))

		pre := page.Locator(`[data-testid="step"][data-step="preflight"]`)
		must(pre.Locator(`input[name="acceptLossy"]`).Check())
		must(pre.GetByTestId("step-button").Click())
		run := page.GetByTestId("run")
		must(expect.Locator(run).ToHaveAttribute("data-state", "passed", slow))
		must(expect.Locator(page.Locator(`[data-testid="check"][data-check="permissions"]`)).ToHaveAttribute("data-verdict", "Pass"))
		shot(t, page, shots, "preflight.png")

		apply := page.Locator(`[data-testid="step"][data-step="apply"]`)
		must(expect.Locator(apply).ToHaveAttribute("data-enabled", "true"))
		must(apply.Locator(`input[name="acceptLossy"]`).Check())
		must(apply.GetByTestId("step-button").Click())
		must(expect.Locator(run).ToHaveAttribute("data-action", "apply"))
		// The page refreshes itself while apply runs, until it ends.
		must(expect.Locator(run).ToHaveAttribute("data-state", "passed", slow))
		for _, n := range f.Nodes {
			must(expect.Locator(page.Locator(`[data-testid="node-progress"][data-node="`+n+`"]`)).ToHaveAttribute("data-state", "handed-over"))
		}
		must(expect.Locator(page.GetByTestId("migration-status")).ToContainText("Finished"))
		must(expect.Locator(page.Locator(`[data-step="rollback"] [data-testid="step-why"]`)).ToContainText("nothing left to hand the nodes back to"))
		shot(t, page, shots, "applied.png")

		must(page.Locator(`[data-testid="step"][data-step="verify"] [data-testid="step-button"]`).Click())
		must(expect.Locator(run).ToHaveAttribute("data-action", "verify"))
		must(expect.Locator(page.GetByTestId("verify-result")).ToHaveAttribute("data-differences", "0", playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: slow.Timeout}))
		shot(t, page, shots, "verified.png")
	})
}

func shot(t *testing.T, page playwright.Page, dir, name string) {
	p := filepath.Join(dir, name)
	if _, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(p), FullPage: playwright.Bool(true)}); err != nil {
		t.Errorf("screenshot %s: %v", p, err)
		return
	}
	t.Logf("screenshot: %s", p)
}

// mustFor fails the test on an error, with a screenshot of the page.
func mustFor(t *testing.T, page playwright.Page, dir string) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			shot(t, page, dir, "failure.png")
			t.Fatal(err)
		}
	}
}
