package hosttest_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/migratetest"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/operator/optest"
	"github.com/lvms-dev/lvms/web"
	"github.com/lvms-dev/lvms/web/browsertest"
)

// serveWizard is serve with the migration wizard on, as the operator runs it.
func serveWizard(t *testing.T) *httptest.Server {
	t.Helper()
	testenv.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	pool := live.NewPool(ctx, env.Config, live.Options{Cluster: "envtest"}, 0)
	runner := wizard.NewRunner(ctx, nil)
	runner.Poll = 100 * time.Millisecond
	t.Cleanup(cancel)
	return host(t, web.NewServer(web.Options{Sources: pool.For, RequireToken: true, Migration: &web.Migration{Clients: pool.Client, Runner: runner}}))
}

// rulesFor grants exactly the permissions the migration's steps need.
func rulesFor(actions ...handover.Action) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, a := range handover.Needs(actions...) {
		i := slices.IndexFunc(rules, func(r rbacv1.PolicyRule) bool { return r.APIGroups[0] == a.Group && r.Resources[0] == a.Resource })
		if i < 0 {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{a.Group}, Resources: []string{a.Resource}})
			i = len(rules) - 1
		}
		rules[i].Verbs = append(rules[i].Verbs, a.Verb)
	}
	return rules
}

// TestPlugin_MigrationWizard walks the plugin's migration page in chromium through the console host, each
// user with their own token as the console's proxy sends it: a user who may only plan sees the write steps
// disabled with what they lack; a user granted exactly the migration's permissions (not cluster-admin)
// runs preflight, apply (the page follows until both nodes are handed over) and verify.
func TestPlugin_MigrationWizard(t *testing.T) {
	testenv.Require(t)
	f := migratetest.New(t, env, optest.V1Ready)
	srv := serveWizard(t)
	ctx := context.Background()
	reader, err := consoletest.UserToken(ctx, env.Config, f.C, f.NS, "planner", rulesFor(handover.ActionPlan))
	if err != nil {
		t.Fatal(err)
	}
	migrator, err := consoletest.UserToken(ctx, env.Config, f.C, f.NS, "migrator", rulesFor(handover.ActionPlan, handover.ActionPreflight,
		handover.ActionApply, handover.ActionVerify, handover.ActionRollback))
	if err != nil {
		t.Fatal(err)
	}
	b := browsertest.Chromium(t)
	expect := playwright.NewPlaywrightAssertions(15000)
	slow := playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(float64(optest.DefaultTimeout.Milliseconds()))}
	open := func(token string) playwright.Page {
		page, err := b.NewPage(playwright.BrowserNewPageOptions{Viewport: &playwright.Size{Width: 1400, Height: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		// The LVMCluster's details tab links to the wizard.
		if _, err := page.Goto(srv.URL + "/k8s/ns/" + f.NS + "/LVMCluster/" + migratetest.ClusterName + "/lvms?token=" + token); err != nil {
			t.Fatal(err)
		}
		if err := page.Locator(`[data-test="migrate-link"]`).Click(); err != nil {
			t.Fatal(err)
		}
		return page
	}
	must := func(page playwright.Page, err error) {
		t.Helper()
		if err != nil {
			if _, serr := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(browsertest.ArtifactDir(t) + "/failure.png"), FullPage: playwright.Bool(true)}); serr == nil {
				t.Logf("screenshot: %s/failure.png", browsertest.ArtifactDir(t))
			}
			t.Fatal(err)
		}
	}

	page := open(reader)
	pre := page.Locator(`[data-step="preflight"]`)
	must(page, expect.Locator(pre).ToHaveAttribute("data-enabled", "false"))
	must(page, expect.Locator(pre.Locator(`[data-test="step-button"]`)).ToBeDisabled())
	must(page, expect.Locator(pre.Locator(`[data-test="missing-permission"]`).Filter(playwright.LocatorFilterOptions{
		HasText: "patch lvmclusters.lvm.topolvm.io in namespace " + f.NS})).ToHaveCount(1))
	must(page, expect.Locator(page.Locator(`[data-test="plan-report"]`)).ToContainText(migratetest.ClusterName))

	page = open(migrator)
	must(page, expect.Locator(page.Locator(`[data-test="migration-status"]`)).ToContainText("Not started"))
	must(page, page.Locator(`#accept-lossy`).Check())
	must(page, page.Locator(`[data-step="preflight"] [data-test="step-button"]`).Click())
	run := page.Locator(`[data-test="run"]`)
	must(page, expect.Locator(run).ToHaveAttribute("data-state", "passed", slow))
	must(page, expect.Locator(page.Locator(`[data-check="permissions"]`)).ToHaveAttribute("data-verdict", "Pass"))
	must(page, page.Locator(`[data-step="apply"] [data-test="step-button"]`).Click())
	must(page, expect.Locator(run).ToHaveAttribute("data-action", "apply", slow))
	must(page, expect.Locator(run).ToHaveAttribute("data-state", "passed", slow))
	for _, n := range f.Nodes {
		must(page, expect.Locator(page.Locator(`[data-node="`+n+`"]`)).ToHaveAttribute("data-state", "handed-over"))
	}
	must(page, expect.Locator(page.Locator(`[data-test="migration-status"]`)).ToContainText("Finished"))
	must(page, page.Locator(`[data-step="verify"] [data-test="step-button"]`).Click())
	must(page, expect.Locator(page.Locator(`[data-test="verify-result"]`)).ToHaveAttribute("data-differences", "0", playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: slow.Timeout}))
}
