package wizard_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/migratetest"
	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/operator/optest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// awaitEnd waits (on the API server's pace, bounded by optest's timeout) for the run to end.
func awaitEnd(t *testing.T, r *wizard.Runner, ns string) wizard.Run {
	t.Helper()
	var run wizard.Run
	optest.Eventually(t, "the run to end", func() (bool, string) {
		run, _ = r.Last(ns, migratetest.ClusterName)
		return !run.Running(), optest.Describe(run.Events)
	})
	return run
}

func stepsOf(st *wizard.State) map[string]wizard.Step {
	out := map[string]wizard.Step{}
	for _, s := range st.Steps {
		out[string(s.Action)] = s
	}
	return out
}

// TestWizard_WalkedByAnAdmin: the steps open up in order (apply only after a passed preflight, verify and
// rollback only once a record exists), the runner refuses a second run while one runs, and the walk ends
// with the migration finished and verify finding no difference.
func TestWizard_WalkedByAnAdmin(t *testing.T) {
	testenv.Require(t)
	f := migratetest.New(t, env, optest.V1Ready)
	ctx := context.Background()
	r := wizard.NewRunner(ctx, nil)
	r.Poll = 50 * time.Millisecond

	st, err := wizard.Load(ctx, f.C, f.NS, migratetest.ClusterName, r.PreflightPassed(f.NS, migratetest.ClusterName))
	if err != nil {
		t.Fatal(err)
	}
	steps := stepsOf(st)
	for _, a := range []string{"plan", "preflight"} {
		if !steps[a].Enabled() {
			t.Errorf("%s is not enabled for an admin before the migration: %+v", a, steps[a])
		}
	}
	for a, why := range map[string]string{"apply": "run preflight first", "verify": "nothing to compare yet", "rollback": "no migration under way"} {
		if steps[a].Available || !strings.Contains(steps[a].Why, why) {
			t.Errorf("%s before preflight: available %v, why %q; want unavailable because %q", a, steps[a].Available, steps[a].Why, why)
		}
	}
	if st.Plan == nil || len(st.Plan.NodeSets) == 0 {
		t.Fatalf("no plan: %+v", st)
	}

	if _, err := r.Start(f.C, f.NS, migratetest.ClusterName, handover.ActionPreflight, wizard.Options{AcceptLossy: true}); err != nil {
		t.Fatal(err)
	}
	if run := awaitEnd(t, r, f.NS); !run.Passed() {
		t.Fatalf("preflight did not pass: %s %+v", run.Err, run.Checks)
	}
	st, err = wizard.Load(ctx, f.C, f.NS, migratetest.ClusterName, r.PreflightPassed(f.NS, migratetest.ClusterName))
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Step(handover.ActionApply); !s.Enabled() {
		t.Fatalf("apply not enabled after a passed preflight: %+v", s)
	}

	if _, err := r.Start(f.C, f.NS, migratetest.ClusterName, handover.ActionApply, wizard.Options{AcceptLossy: true, By: "admin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(f.C, f.NS, migratetest.ClusterName, handover.ActionVerify, wizard.Options{}); !errors.Is(err, wizard.ErrBusy) {
		t.Errorf("a second step while apply runs: %v, want ErrBusy", err)
	}
	run := awaitEnd(t, r, f.NS)
	if !run.Passed() {
		t.Fatalf("apply failed: %s", run.Err)
	}
	var handedOver []string
	for _, e := range run.Events {
		if e.Step == "hand-over" && e.Node != "" && !slices.Contains(handedOver, e.Node) {
			handedOver = append(handedOver, e.Node)
		}
	}
	if !slices.Equal(handedOver, f.Nodes) {
		t.Errorf("apply's progress names nodes %v, want each of %v", handedOver, f.Nodes)
	}

	st, err = wizard.Load(ctx, f.C, f.NS, migratetest.ClusterName, false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Done() || st.Record.Step != record.StepClusterRemoved {
		t.Errorf("after apply the state is not done: %+v", st.Record)
	}
	steps = stepsOf(st)
	if steps["rollback"].Available || !strings.Contains(steps["rollback"].Why, "nothing left to hand the nodes back to") {
		t.Errorf("rollback after the end: %+v", steps["rollback"])
	}
	if !steps["verify"].Enabled() {
		t.Errorf("verify not enabled after the end: %+v", steps["verify"])
	}
	for _, n := range st.Nodes {
		if !n.HandedOver {
			t.Errorf("node %s not handed over in the state", n.Name)
		}
	}
	if _, err := r.Start(f.C, f.NS, migratetest.ClusterName, handover.ActionVerify, wizard.Options{}); err != nil {
		t.Fatal(err)
	}
	if run := awaitEnd(t, r, f.NS); !run.Passed() {
		t.Errorf("verify after the migration: %s %v", run.Err, run.Verification)
	}
}

// TestWizard_ReaderSeesWhatItLacks: a user who may only read LVMClusters and StorageClasses sees the plan,
// and preflight with every missing permission named.
func TestWizard_ReaderSeesWhatItLacks(t *testing.T) {
	testenv.Require(t)
	f := migratetest.New(t, env, optest.V1Ready)
	ctx := context.Background()
	token, err := consoletest.UserToken(ctx, env.Config, f.C, f.NS, "reader", []rbacv1.PolicyRule{
		{APIGroups: []string{lvmv1.GroupVersion.Group}, Resources: []string{"lvmclusters"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"list"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := wizard.Load(ctx, c, f.NS, migratetest.ClusterName, false)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Step(handover.ActionPlan); !s.Enabled() || st.Plan == nil {
		t.Errorf("a reader cannot plan: %+v", s)
	}
	pre := st.Step(handover.ActionPreflight)
	if pre.Enabled() {
		t.Fatalf("preflight enabled for a reader: %+v", pre)
	}
	for _, want := range []string{"patch lvmclusters.lvm.topolvm.io in namespace " + f.NS, "create lvmnodesets.lvm.topolvm.io in namespace " + f.NS, "list persistentvolumes"} {
		if !slices.Contains(pre.Missing, want) {
			t.Errorf("preflight's missing permissions %v lack %q", pre.Missing, want)
		}
	}
	if slices.Contains(pre.Missing, "list lvmclusters.lvm.topolvm.io in namespace "+f.NS) {
		t.Errorf("a granted permission is listed as missing: %v", pre.Missing)
	}
}
