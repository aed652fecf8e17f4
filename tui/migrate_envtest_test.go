package tui

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/migratetest"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/operator/optest"
)

// env is the test API server of the package's tests (only the migration tests use it).
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// driver plays bubbletea's event loop for a Model without a terminal: it runs every command the model
// returns in the background and hands the messages they produce to Update one at a time, on the test's
// goroutine, so the test reads View() between messages without racing the model.
type driver struct {
	t    *testing.T
	m    *Model
	msgs chan tea.Msg
	done chan struct{}
}

func newDriver(t *testing.T, m *Model) *driver {
	d := &driver{t: t, m: m, msgs: make(chan tea.Msg), done: make(chan struct{})}
	t.Cleanup(func() { close(d.done) })
	d.send(tea.WindowSizeMsg{Width: 160, Height: 48})
	return d
}

func (d *driver) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() {
		msg := cmd()
		select {
		case d.msgs <- msg:
		case <-d.done:
		}
	}()
}

func (d *driver) send(msg tea.Msg) {
	switch msg := msg.(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			d.run(c)
		}
	default:
		_, cmd := d.m.Update(msg)
		d.run(cmd)
	}
}

func (d *driver) keys(keys ...string) {
	for _, k := range keys {
		msg := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEsc}
		}
		d.send(msg)
	}
}

// until hands the model its messages (loads, ticks) until the screen satisfies ok, and returns that
// screen. The bound only keeps a broken run from hanging the test.
func (d *driver) until(what string, ok func(screen string) bool) string {
	d.t.Helper()
	bound := time.After(2 * optest.DefaultTimeout)
	for {
		screen := d.m.View()
		if ok(screen) {
			return screen
		}
		select {
		case msg := <-d.msgs:
			d.send(msg)
		case <-bound:
			d.t.Fatalf("gave up waiting for %s; the screen shows:\n%s", what, screen)
		}
	}
}

// stepIs matches the step list's row of a step in one of the states.
func stepIs(step string, states ...string) func(string) bool {
	re := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(step) + ` +(` + strings.Join(states, "|") + `)│`)
	return func(screen string) bool { return re.MatchString(screen) }
}

// open opens the migration screen with M and, when it lists several LVMClusters, picks t.
func (d *driver) open(t types.NamespacedName) string {
	d.t.Helper()
	d.keys("M")
	d.until("the LVMClusters or the migration", func(s string) bool {
		return strings.Contains(s, "migrate "+t.String()) || (d.m.mig.picking && len(d.m.mig.clusters) > 0) || d.m.mig.err != nil
	})
	if d.m.mig.picking {
		for d.m.mig.pick < len(d.m.mig.clusters)-1 && d.m.mig.clusters[d.m.mig.pick] != t {
			d.keys("j")
		}
		d.keys("enter")
	}
	return d.until("the steps of "+t.String(), stepIs("Plan", "ready", "not now", "no access"))
}

func newMigrationModel(ctx context.Context, c client.Client, r *wizard.Runner, ns string) *Model {
	return New(Options{Context: ctx, Source: console.Static{Snap: &console.Snapshot{Installed: true}}, Renderer: asciiRenderer(),
		Migration: &Migration{Client: c, Runner: r, Namespace: ns}})
}

// An admin walks the migration in the TUI against a real API server, with the operator and fake node
// agents: plan, preflight, apply (confirmed), verify.
func TestMigration_AdminWalksTheWizard(t *testing.T) {
	testenv.Require(t)
	f := migratetest.New(t, env, optest.V1Ready)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // stops a run still going before the fixture's teardown
	r := wizard.NewRunner(ctx, nil)
	r.Poll = 50 * time.Millisecond
	cl := types.NamespacedName{Namespace: f.NS, Name: migratetest.ClusterName}
	d := newDriver(t, newMigrationModel(ctx, env.Client, r, f.NS))

	screen := d.open(cl)
	wantIn(t, screen, "Migration plan for LVMCluster "+cl.String(), "Result: ")
	wantRow(t, screen, "Preflight", "ready")
	wantRow(t, screen, "Apply", "not now")

	d.keys("j")
	wantIn(t, d.m.View(), "Check, without writing anything, that the migration can run now.", "enter: run Preflight")
	if d.m.mig.state.Plan.Lossy() { // the seed's device paths are required in v1 and not in v2
		d.keys("enter")
		wantIn(t, d.m.View(), "the plan is lossy: read it (Plan), then press a to accept its differences")
		if _, ran := r.Last(f.NS, cl.Name); ran {
			t.Fatal("preflight of a lossy plan started without the acceptance")
		}
		d.keys("a")
		wantIn(t, d.m.View(), "lossy plan: accepted")
	}
	d.keys("enter")
	screen = d.until("preflight to end", stepIs("Preflight", "passed", "failed"))
	wantRow(t, screen, "Preflight", "passed")
	wantIn(t, screen, "[Pass] permissions: ", "[Pass] dry-run: ", "[Pass] cluster-ready: ")

	d.until("apply to open up after the passed preflight", stepIs("Apply", "ready"))
	d.keys("j", "enter")
	wantIn(t, d.m.View(), "Migrate LVMCluster "+cl.String()+" to LVMNodeSets now, node by node? y: yes")
	if run, _ := r.Last(f.NS, cl.Name); run.Action != handover.ActionPreflight {
		t.Fatalf("apply started before the yes: %+v", run)
	}
	d.keys("y")
	screen = d.until("apply to end", stepIs("Apply", "passed", "failed"))
	wantRow(t, screen, "Apply", "passed")
	// The state once apply ended (a state loaded during the run may show first): the migration is
	// finished, every node handed over, the bar full on the last step.
	screen = d.until("the state after apply", func(s string) bool {
		return strings.Contains(s, "✓ "+f.Nodes[1]+"  handed over") && stepIs("Roll back", "not now")(s)
	})
	wantIn(t, screen, "✓ "+f.Nodes[0]+"  handed over", "✓ "+f.Nodes[1]+"  handed over", strings.Repeat("█", 40)+" done 1/1",
		"[done 1/1] LVMCluster "+cl.String()+" is removed")

	d.keys("j", "enter")
	screen = d.until("verify to end", stepIs("Verify", "passed", "failed"))
	wantRow(t, screen, "Verify", "passed")
	wantIn(t, screen, "No difference.", "Compared at step ClusterRemoved")
	d.keys("j")
	wantIn(t, d.m.View(), "Not now: the LVMCluster's removal was asked for: there is nothing left to hand the nodes back to.")
}

// A user who may only read sees apply closed to them, with every permission it lacks named, and cannot
// start it. The runner is shared, as in the web console: the preflight an admin passed opens apply.
func TestMigration_ReaderSeesWhatItLacks(t *testing.T) {
	testenv.Require(t)
	f := migratetest.New(t, env, optest.V1Ready)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := wizard.NewRunner(ctx, nil)
	r.Poll = 50 * time.Millisecond
	if _, err := r.Start(env.Client, f.NS, migratetest.ClusterName, handover.ActionPreflight, wizard.Options{AcceptLossy: true, By: "admin"}); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the admin's preflight to pass", func() (bool, string) {
		return r.PreflightPassed(f.NS, migratetest.ClusterName), ""
	})

	token, err := consoletest.UserToken(ctx, env.Config, env.Client, f.NS, "reader", []rbacv1.PolicyRule{
		{APIGroups: []string{lvmv1.GroupVersion.Group}, Resources: []string{"lvmclusters"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteUserRBAC(t, f.NS, "reader") })
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	cl := types.NamespacedName{Namespace: f.NS, Name: migratetest.ClusterName}
	d := newDriver(t, newMigrationModel(ctx, c, r, f.NS))
	screen := d.open(cl)
	wantRow(t, screen, "Plan", "ready")
	wantIn(t, screen, "Migration plan for LVMCluster "+cl.String())

	d.keys("j", "j")
	screen = d.m.View()
	wantRow(t, screen, "Apply", "no access")
	for _, p := range []string{"patch lvmclusters.lvm.topolvm.io in namespace " + f.NS, "delete lvmclusters.lvm.topolvm.io in namespace " + f.NS,
		"create lvmnodesets.lvm.topolvm.io in namespace " + f.NS, "list persistentvolumes"} {
		wantIn(t, screen, "  - "+p)
	}
	wantIn(t, screen, "permission(s) Apply needs")
	if strings.Contains(screen, "  - list lvmclusters.lvm.topolvm.io") {
		t.Errorf("a granted permission is named as missing:\n%s", screen)
	}
	d.keys("enter")
	wantIn(t, d.m.View(), "permission(s) you lack")
	if run, _ := r.Last(f.NS, migratetest.ClusterName); run.Action != handover.ActionPreflight {
		t.Errorf("the reader started %s", run.Action)
	}
}

// deleteUserRBAC removes the cluster-scoped role and binding consoletest.UserToken made (the namespace's
// deletion takes the service account).
func deleteUserRBAC(t *testing.T, ns, name string) {
	testenv.Require(t)
	ctx := context.Background()
	role := ns + "-" + name
	for _, obj := range []client.Object{&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRole{}} {
		obj.SetName(role)
		if err := env.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %T %s: %v", obj, role, err)
		}
	}
}
