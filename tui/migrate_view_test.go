package tui

import (
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/migrate/wizard"
)

var started = time.Date(2025, 3, 4, 10, 20, 30, 0, time.UTC)

func asciiRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return r
}

// steps is a migration before apply: plan and preflight open, the rest closed, with what the caller lacks.
func steps(missing ...string) []wizard.Step {
	return []wizard.Step{
		{Action: handover.ActionPlan, Title: "Plan", Available: true, Why: "what the LVMCluster becomes, read-only"},
		{Action: handover.ActionPreflight, Title: "Preflight", Available: true, Why: "check, without writing anything, that the migration can run now", Missing: missing},
		{Action: handover.ActionApply, Title: "Apply", Why: "run preflight first: apply starts only after a preflight with no failed check"},
		{Action: handover.ActionVerify, Title: "Verify", Why: "nothing to compare yet: apply records what v1 shows when it starts"},
		{Action: handover.ActionRollback, Title: "Roll back", Why: "no migration under way"},
	}
}

func stepIndex(s []wizard.Step, a handover.Action) int {
	for i := range s {
		if s[i].Action == a {
			return i
		}
	}
	return -1
}

// render draws the screen at w×h and checks it fills exactly that.
func render(t *testing.T, v migrationView, w, h int) string {
	t.Helper()
	r := asciiRenderer()
	lines := renderMigration(newStyles(r), r, v, w, h)
	if len(lines) != h {
		t.Errorf("%d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if lipgloss.Width(l) != w {
			t.Errorf("line %d is %d wide, want %d: %q", i, lipgloss.Width(l), w, l)
		}
	}
	return strings.Join(lines, "\n")
}

func wantIn(t *testing.T, screen string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(screen, w) {
			t.Errorf("screen lacks %q:\n%s", w, screen)
		}
	}
}

// wantRow checks that a row of the step list names the step and then its state.
func wantRow(t *testing.T, screen, step, state string) {
	t.Helper()
	if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(step) + ` +` + regexp.QuoteMeta(state) + `│`).MatchString(screen) {
		t.Errorf("no row says %s is %q:\n%s", step, state, screen)
	}
}

var target = types.NamespacedName{Namespace: "openshift-storage", Name: "my-lvmcluster"}

func TestMigrationView_DisabledStepSaysWhyAndEveryMissingPermission(t *testing.T) {
	missing := []string{"patch lvmclusters.lvm.topolvm.io in namespace openshift-storage",
		"create lvmnodesets.lvm.topolvm.io in namespace openshift-storage", "list persistentvolumes"}
	st := &wizard.State{Namespace: target.Namespace, Cluster: target.Name, Steps: steps(missing...)}
	v := migrationView{Target: target, State: st, Cursor: stepIndex(st.Steps, handover.ActionPreflight)}
	screen := render(t, v, 160, 30)
	wantRow(t, screen, "Preflight", "no access")
	wantRow(t, screen, "Apply", "not now")
	wantIn(t, screen, "You lack 3 permission(s) Preflight needs")
	for _, p := range missing {
		wantIn(t, screen, "  - "+p)
	}
	if strings.Contains(screen, "enter: run Preflight") {
		t.Error("a step the user may not take offers to run")
	}

	v.Cursor = stepIndex(st.Steps, handover.ActionApply)
	wantIn(t, render(t, v, 160, 30), "Not now: run preflight first: apply starts only after a preflight with no failed check.")
	// Narrow terminals get the same screen, wrapped and cut.
	render(t, v, 40, 12)
	render(t, v, 20, 5)
}

func TestMigrationView_RunningApplyShowsBarAndNodes(t *testing.T) {
	st := &wizard.State{Namespace: target.Namespace, Cluster: target.Name, Steps: steps(),
		Nodes: []wizard.NodeState{{Name: "worker-a", HandedOver: true}, {Name: "worker-b"}, {Name: "worker-c"}}}
	st.Steps[stepIndex(st.Steps, handover.ActionApply)] = wizard.Step{Action: handover.ActionApply, Title: "Apply", Available: true, Why: "resume"}
	run := &wizard.Run{Action: handover.ActionApply, Started: started, Events: []handover.Progress{
		{Step: "mark", Done: 1, Total: 1, Message: "marked LVMCluster"},
		{Step: "create-sets", Done: 1, Total: 1, Message: "created LVMNodeSet openshift-storage/my-lvmcluster"},
		{Step: "hand-over", Node: "worker-a", Done: 0, Total: 3, Message: "handing node worker-a over to the LVMNodeSets"},
		{Step: "hand-over", Node: "worker-a", Done: 1, Total: 3, Message: "node worker-a is managed by the LVMNodeSets; its volume groups were adopted"},
		{Step: "hand-over", Node: "worker-b", Done: 1, Total: 3, Message: "handing node worker-b over to the LVMNodeSets"},
	}}
	v := migrationView{Target: target, State: st, Run: run, Cursor: stepIndex(st.Steps, handover.ActionApply)}
	screen := render(t, v, 160, 30)
	// The bar is 40 cells: a third of it filled.
	wantIn(t, screen, strings.Repeat("█", 13)+strings.Repeat("░", 27)+" hand-over 1/3",
		"✓ worker-a  handed over", "▶ worker-b  in progress", "· worker-c  pending",
		"Running since 10:20:30Z · s: stop",
		"[hand-over 1/3] handing node worker-b over to the LVMNodeSets", "[create-sets 1/1] created LVMNodeSet")
	wantRow(t, screen, "Apply", "running")
	if strings.Contains(screen, "[mark 1/1]") {
		t.Error("more than the latest messages are shown")
	}

	// A rollback under way: the node it works on is handed back, the others wait or are back.
	run = &wizard.Run{Action: handover.ActionRollback, Started: started, Events: []handover.Progress{
		{Step: "hand-back", Node: "worker-a", Done: 0, Total: 1, Message: "handing node worker-a back to the LVMCluster"}}}
	v.Run, v.Cursor = run, stepIndex(st.Steps, handover.ActionRollback)
	wantIn(t, render(t, v, 160, 30), "▶ worker-a  in progress: handing back", "· worker-b  with the LVMCluster", "hand-back 0/1")
}

func TestMigrationView_PreflightFailuresShowReasonAndFix(t *testing.T) {
	st := &wizard.State{Namespace: target.Namespace, Cluster: target.Name, Steps: steps()}
	run := &wizard.Run{Action: handover.ActionPreflight, Started: started, Ended: started.Add(time.Second), Checks: []handover.Check{
		{Name: "dry-run", Verdict: handover.Pass, Reason: "the API server accepts every object", Fix: "never shown on a pass"},
		{Name: "cluster-ready", Verdict: handover.Fail, Reason: "LVMCluster is Degraded on node worker-b", Fix: "fix the node, then run preflight again"},
		{Name: "plan", Verdict: handover.Warn, Reason: "the plan is lossy (1 mapping behaves differently in v2alpha1); accepted", Fix: "read them in lvms migrate plan"},
		{Name: "volumes", Verdict: handover.Info, Reason: "1 PersistentVolume on the classes", Details: []string{"PersistentVolume pv-1 on node worker-a"}},
	}}
	v := migrationView{Target: target, State: st, Run: run, Cursor: stepIndex(st.Steps, handover.ActionPreflight)}
	screen := render(t, v, 160, 30)
	wantRow(t, screen, "Preflight", "failed")
	wantIn(t, screen, "[Fail] cluster-ready: LVMCluster is Degraded on node worker-b", "fix: fix the node, then run preflight again",
		"[Warn] plan: the plan is lossy", "fix: read them in lvms migrate plan", "[Pass] dry-run: the API server accepts every object",
		"    PersistentVolume pv-1 on node worker-a", "1 check(s) failed")
	if strings.Contains(screen, "never shown on a pass") {
		t.Error("a passed check shows a fix")
	}
}

func TestMigrationView_VerifyListsDifferences(t *testing.T) {
	st := &wizard.State{Namespace: target.Namespace, Cluster: target.Name, Steps: steps()}
	st.Steps[stepIndex(st.Steps, handover.ActionVerify)].Available = true
	ver := &handover.Verification{Step: handover.StepClusterRemoved, Differences: []string{
		"PersistentVolume pv-1 is missing", "node worker-b: volume group vg1 lost device /dev/sdc"}}
	run := &wizard.Run{Action: handover.ActionVerify, Started: started, Ended: started, Verification: ver}
	v := migrationView{Target: target, State: st, Run: run, Cursor: stepIndex(st.Steps, handover.ActionVerify)}
	screen := render(t, v, 160, 30)
	wantRow(t, screen, "Verify", "failed")
	wantIn(t, screen, "2 difference(s):", "  - PersistentVolume pv-1 is missing",
		"  - node worker-b: volume group vg1 lost device /dev/sdc", "Compared at step ClusterRemoved")

	run.Verification = &handover.Verification{Step: handover.StepClusterRemoved}
	screen = render(t, v, 160, 30)
	wantRow(t, screen, "Verify", "passed")
	wantIn(t, screen, "No difference.")
}

func lossyPlan() *plan.Plan {
	return &plan.Plan{Namespace: target.Namespace, Name: target.Name,
		NodeSets: []lvmv2.LVMNodeSet{{ObjectMeta: metav1.ObjectMeta{Namespace: target.Namespace, Name: target.Name}}},
		Findings: []plan.Finding{{Code: plan.CodeRAIDNotSupported, Severity: plan.Lossy, Path: "spec.storage.deviceClasses[0].raidConfig",
			Message: "raidConfig has no v2alpha1 equivalent"}}}
}

func TestMigrationView_PlanReport(t *testing.T) {
	st := &wizard.State{Namespace: target.Namespace, Cluster: target.Name, Steps: steps(), Plan: lossyPlan()}
	v := migrationView{Target: target, State: st}
	screen := render(t, v, 160, 40)
	wantIn(t, screen, "Migration plan for LVMCluster openshift-storage/my-lvmcluster", "Result: LOSSY", "[Lossy] RAIDNotSupported",
		"press a to accept them", "lossy plan: not accepted (a)")
	v.Accepted = true
	wantIn(t, render(t, v, 160, 40), "You accepted the 1 lossy mapping below", "lossy plan: accepted")
	// The report scrolls.
	v.Scroll = 6
	if s := render(t, v, 160, 40); strings.Contains(s, "Migration plan for LVMCluster") {
		t.Errorf("the report did not scroll:\n%s", s)
	}
}

// model is the UI on the migration screen of a loaded state, with a runner that never gets to run
// anything (the keys tested here stop before a step starts).
func model(st *wizard.State) *Model {
	m := New(Options{Source: console.Static{Snap: &console.Snapshot{Installed: true}}, Renderer: asciiRenderer(),
		Migration: &Migration{Runner: wizard.NewRunner(context.Background(), nil), Namespace: target.Namespace}})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 30})
	m.stack = []screen{{kind: viewNodes}, {kind: viewMigrate}}
	m.mig.target, m.mig.state = target, st
	return m
}

func press(m *Model, keys ...string) {
	for _, k := range keys {
		msg := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEsc}
		}
		m.Update(msg)
	}
}

func TestMigration_LossyPlanNeedsAcceptanceAndApplyAsks(t *testing.T) {
	st := &wizard.State{Namespace: target.Namespace, Cluster: target.Name, Steps: steps(), Plan: lossyPlan()}
	st.Steps[stepIndex(st.Steps, handover.ActionApply)].Available = true
	m := model(st)
	press(m, "j", "enter")
	wantIn(t, m.View(), "the plan is lossy: read it (Plan), then press a to accept its differences")
	press(m, "a")
	wantIn(t, m.View(), "lossy differences accepted", "lossy plan: accepted")
	press(m, "j", "enter")
	wantIn(t, m.View(), "Migrate LVMCluster openshift-storage/my-lvmcluster to LVMNodeSets now, node by node? y: yes")
	press(m, "n")
	wantIn(t, m.View(), "Apply cancelled")
	if _, ran := m.mig.opts.Runner.Last(target.Namespace, target.Name); ran {
		t.Error("apply ran without a yes")
	}
	// A disabled step says why instead of running.
	press(m, "j", "enter")
	wantIn(t, m.View(), "Verify: nothing to compare yet")
	press(m, "esc")
	if m.top().kind == viewMigrate {
		t.Error("esc did not leave the migration screen")
	}
}

func TestMigration_NotOfferedWithoutACluster(t *testing.T) {
	m := New(Options{Source: console.Static{Snap: &console.Snapshot{Installed: true}}, Renderer: asciiRenderer()})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	press(m, "M")
	if m.top().kind == viewMigrate {
		t.Error("M opened the wizard without a cluster")
	}
	press(m, "?")
	if strings.Contains(m.View(), "migrate an LVMCluster") {
		t.Error("help offers the wizard without a cluster")
	}
	press(m, "?", ":")
	for _, r := range "migrate" {
		press(m, string(r))
	}
	press(m, "enter")
	wantIn(t, m.View(), "the migration wizard needs a live cluster")
}

// Cluster-supplied text cannot drive the terminal.
func TestMigration_StateIsMadePlain(t *testing.T) {
	st := &wizard.State{Steps: []wizard.Step{{Action: handover.ActionPlan, Title: "Plan", Why: "bad\x1b]52;c;aGk=\x07 name"}}}
	m := model(nil)
	m.mig.seq = 7
	m.Update(migrateStateMsg{seq: 7, state: st})
	if s := m.View(); strings.Contains(s, "\x1b]52") || !strings.Contains(s, "Not now: bad name.") {
		t.Errorf("the state was not made plain:\n%q", s)
	}
	// An older load's answer does not overwrite a newer one.
	m.Update(migrateStateMsg{seq: 6, state: &wizard.State{}})
	if m.mig.state != st {
		t.Error("a stale state replaced the current one")
	}
}

// Quitting while a step runs stops it: the first q only warns.
func TestMigration_QuitWhileRunningAsksTwice(t *testing.T) {
	m := model(&wizard.State{Steps: steps()})
	m.mig.run = &wizard.Run{Action: handover.ActionApply, Started: started}
	quits := func() bool {
		_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
		if cmd == nil {
			return false
		}
		_, ok := cmd().(tea.QuitMsg)
		return ok
	}
	if quits() {
		t.Fatal("the first q quit while apply runs")
	}
	wantIn(t, m.View(), "Apply is running: quitting stops it")
	if !quits() {
		t.Error("the second q did not quit")
	}
}
