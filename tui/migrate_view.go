package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/words"
)

// migrationView is everything the migration screen shows; renderMigration is a pure function of it, so
// tests render any state without a cluster. Its strings are already safe to print (see plainStrings).
type migrationView struct {
	// Picking shows Clusters to choose from, Pick under the cursor.
	Picking  bool
	Clusters []types.NamespacedName
	Pick     int
	// ListNamespace is where LVMClusters were listed when the user may not list them everywhere.
	ListNamespace string

	Target types.NamespacedName
	State  *wizard.State
	// Run is the migration's last run (nil when none ran in this process).
	Run      *wizard.Run
	Cursor   int
	Scroll   int
	Accepted bool
	Confirm  handover.Action
	Loading  bool
	Err      string
}

// migrationBody renders the migration screen into h lines of width w.
func (m *Model) migrationBody(w, h int) []string {
	return renderMigration(m.st, m.opts.Renderer, m.migrationView(), w, h)
}

// renderMigration renders the screen: the steps (or the LVMClusters) on the left, the selected one's
// detail on the right.
func renderMigration(st styles, r *lipgloss.Renderer, v migrationView, w, h int) []string {
	switch {
	case v.Err != "" && (v.Picking || v.State == nil):
		return fill(wrapAll(r, []string{st.err.Render("The migration could not be read."), "", capitalise(v.Err) + ".", "",
			"r: retry · esc: back"}, w), w, h)
	case v.Picking && v.Loading && len(v.Clusters) == 0:
		return fill([]string{"listing LVMClusters…"}, w, h)
	case v.Picking && len(v.Clusters) == 0:
		where := "in any namespace you may list"
		if v.ListNamespace != "" {
			where += " (or in namespace " + v.ListNamespace + ")"
		}
		return fill(wrapAll(r, []string{"No LVMCluster to migrate " + where + ".", "",
			"The migration wizard moves a v1alpha1 LVMCluster to v2alpha1 LVMNodeSets; without an LVMCluster there is nothing to do.",
			"", "r: list again · esc: back"}, w), w, h)
	case !v.Picking && v.State == nil:
		return fill([]string{"loading the migration of LVMCluster " + v.Target.String() + "…"}, w, h)
	}
	leftW := min(max(w/3, 24), 44)
	if w < 60 {
		leftW = w / 2
	}
	rightW := w - leftW - 1
	var left, right []string
	if v.Picking {
		left, right = clusterList(st, r, v, leftW, h), []string{"LVMCluster " + v.Clusters[min(v.Pick, len(v.Clusters)-1)].String(), "",
			"enter: plan, check and run its migration to v2alpha1 LVMNodeSets."}
	} else {
		left = stepList(st, r, v, leftW, h)
		right = stepDetail(st, r, v, rightW)
	}
	right = wrapAll(r, right, rightW)
	if v.Scroll > 0 {
		right = right[min(v.Scroll, max(len(right)-1, 0)):]
	}
	right = fill(right, rightW, h)
	sep := st.border.Render("│")
	out := make([]string, h)
	for i := range h {
		out[i] = left[i] + sep + right[i]
	}
	return out
}

func clusterList(st styles, r *lipgloss.Renderer, v migrationView, w, h int) []string {
	lines := []string{st.header.Render(ansi.Truncate(fmt.Sprintf("LVMClusters (%d)", len(v.Clusters)), w, "…"))}
	off := max(v.Pick-(h-4)+1, 0)
	for i := off; i < len(v.Clusters) && len(lines) < h-3; i++ {
		text := fit("  "+v.Clusters[i].String(), w)
		if i == v.Pick {
			text = st.selected.Render(text)
		}
		lines = append(lines, text)
	}
	lines = append(lines, "")
	lines = append(lines, wrapAll(r, []string{st.muted.Render("enter open · esc back")}, w)...)
	return fill(lines, w, h)
}

// stepState is a step's word in the list, and how to colour it: the outcome of its last run comes first
// (apply that finished the migration passed, though it cannot run again).
func stepState(st styles, s wizard.Step, run *wizard.Run) (string, lipgloss.Style) {
	ran := run != nil && run.Action == s.Action
	switch {
	case ran && run.Running():
		return "running", st.info
	case ran && run.Passed():
		return "passed", st.ok
	case ran:
		return "failed", st.err
	case !s.Available:
		return "not now", st.muted
	case len(s.Missing) > 0:
		return "no access", st.warn
	}
	return "ready", st.key
}

func stepList(st styles, r *lipgloss.Renderer, v migrationView, w, h int) []string {
	lines := []string{st.header.Render(ansi.Truncate("migrate "+v.Target.String(), w, "…"))}
	for i, s := range v.State.Steps {
		word, style := stepState(st, s, v.Run)
		nameW := max(w-2-len(word)-1, 4)
		name := "  " + pad(ansi.Truncate(s.Title, nameW, "…"), nameW) + " "
		switch {
		case i == v.Cursor:
			lines = append(lines, st.selected.Render(fit(name+word, w)))
		case s.Enabled():
			lines = append(lines, fit(name+style.Render(word), w))
		default:
			lines = append(lines, fit(st.muted.Render(name)+style.Render(word), w))
		}
	}
	lines = append(lines, "")
	if run := v.Run; run != nil {
		summary := wizard.Title(run.Action) + " " + runOutcome(run)
		if p, ok := run.Latest(); ok && run.Running() {
			summary += fmt.Sprintf(" · %s %d/%d", p.Step, p.Done, p.Total)
		}
		lines = append(lines, wrapAll(r, []string{summary}, w)...)
		lines = append(lines, "")
	}
	if v.State.Plan != nil && v.State.Plan.Lossy() {
		if v.Accepted {
			lines = append(lines, wrapAll(r, []string{st.warn.Render("lossy plan: accepted")}, w)...)
		} else {
			lines = append(lines, wrapAll(r, []string{st.warn.Render("lossy plan: not accepted (a)")}, w)...)
		}
		lines = append(lines, "")
	}
	lines = append(lines, wrapAll(r, []string{st.muted.Render("enter run · a accept lossy · s stop · r reload · esc back")}, w)...)
	return fill(lines, w, h)
}

func runOutcome(run *wizard.Run) string {
	switch {
	case run.Running():
		return "running"
	case run.Passed():
		return "passed"
	case run.Err != "":
		return "stopped"
	}
	return "failed"
}

// stepDetail is the right pane: what the step under the cursor does or why it cannot run, the permissions
// the user lacks for it, and its last run (or the plan report).
func stepDetail(st styles, r *lipgloss.Renderer, v migrationView, w int) []string {
	if v.Cursor >= len(v.State.Steps) {
		return nil
	}
	s := v.State.Steps[v.Cursor]
	word, style := stepState(st, s, v.Run)
	out := []string{st.title.Render(s.Title) + " · " + style.Render(word)}
	if v.Confirm == s.Action {
		out = append(out, "", st.flash.Render(confirmQuestion(s.Action, v.Target)+" y: yes · any other key: no"))
	}
	switch {
	case s.Why == "":
	case s.Available:
		out = append(out, capitalise(s.Why)+".")
	default:
		out = append(out, "Not now: "+s.Why+".")
	}
	if len(s.Missing) > 0 {
		out = append(out, "", st.warn.Render(fmt.Sprintf("You lack %d permission(s) %s needs; ask a cluster admin to grant them:", len(s.Missing), s.Title)))
		for _, p := range s.Missing {
			out = append(out, "  - "+p)
		}
	}
	out = append(out, "")
	var run *wizard.Run
	if v.Run != nil && v.Run.Action == s.Action {
		run = v.Run
	}
	switch s.Action {
	case handover.ActionPlan:
		out = append(out, planDetail(st, v)...)
	case handover.ActionPreflight:
		out = append(out, runHeader(st, run)...)
		if run != nil {
			out = append(out, checkLines(st, run.Checks)...)
		}
	case handover.ActionApply, handover.ActionRollback:
		out = append(out, runHeader(st, run)...)
		out = append(out, progressLines(st, r, v.State, run, w)...)
	case handover.ActionVerify:
		out = append(out, runHeader(st, run)...)
		if run != nil {
			out = append(out, verifyLines(st, run)...)
		}
	}
	if s.Enabled() && s.Action != handover.ActionPlan && (run == nil || !run.Running()) {
		out = append(out, "", st.key.Render("enter")+": run "+s.Title)
	}
	return out
}

func confirmQuestion(a handover.Action, t types.NamespacedName) string {
	if a == handover.ActionRollback {
		return "Roll back the migration of LVMCluster " + t.String() + ", handing every node back to it?"
	}
	return "Migrate LVMCluster " + t.String() + " to LVMNodeSets now, node by node?"
}

// runHeader says whether the step runs, when it started and how it ended.
func runHeader(st styles, run *wizard.Run) []string {
	if run == nil {
		return nil
	}
	at := run.Started.UTC().Format("15:04:05Z")
	switch {
	case run.Running():
		return []string{st.info.Render("Running since "+at) + " · s: stop", ""}
	case run.Err != "":
		return []string{st.err.Render("Stopped: ") + run.Err, ""}
	case run.Passed():
		return []string{st.ok.Render("Passed") + " (started " + at + ")", ""}
	}
	return []string{st.err.Render("Failed") + " (started " + at + ")", ""}
}

func planDetail(st styles, v migrationView) []string {
	p := v.State.Plan
	if p == nil {
		return nil
	}
	var out []string
	if p.Lossy() {
		lossy, _ := p.Counts()
		if v.Accepted {
			out = append(out, st.warn.Render(fmt.Sprintf("You accepted the %s below for preflight and apply (a: take it back).", words.Count(lossy, "lossy mapping", "lossy mappings"))), "")
		} else {
			out = append(out, st.warn.Render(fmt.Sprintf("The plan is lossy: read the %s below, then press a to accept them; preflight and apply need it.", words.Count(lossy, "mapping", "mappings"))), "")
		}
	}
	var b strings.Builder
	if err := plan.WriteText(&b, p); err != nil {
		return append(out, "The plan could not be rendered: "+err.Error())
	}
	return append(out, strings.Split(strings.TrimRight(b.String(), "\n"), "\n")...)
}

func verdictStyle(st styles, v handover.Verdict) lipgloss.Style {
	switch v {
	case handover.Pass:
		return st.ok
	case handover.Warn:
		return st.warn
	case handover.Fail:
		return st.err
	}
	return st.info
}

// checkLines lists every preflight check with its verdict, reason, fix and details, as the CLI does.
func checkLines(st styles, checks []handover.Check) []string {
	var out []string
	failed := 0
	for _, c := range checks {
		out = append(out, verdictStyle(st, c.Verdict).Render("["+string(c.Verdict)+"]")+" "+c.Name+": "+c.Reason)
		if c.Fix != "" && c.Verdict != handover.Pass {
			out = append(out, "    fix: "+c.Fix)
		}
		for _, d := range c.Details {
			out = append(out, "    "+d)
		}
		if c.Verdict == handover.Fail {
			failed++
		}
	}
	if failed > 0 {
		out = append(out, "", st.err.Render(fmt.Sprintf("%d check(s) failed: fix them and run preflight again.", failed)))
	}
	return out
}

// latestShown is how many of a run's latest messages the screen shows.
const latestShown = 4

// progressLines are the bar of the latest event, every node's state and the latest messages.
func progressLines(st styles, r *lipgloss.Renderer, s *wizard.State, run *wizard.Run, w int) []string {
	var out []string
	p, ok := handover.Progress{}, false
	if run != nil {
		p, ok = run.Latest()
	}
	if ok && p.Total > 0 {
		bar := progress.New(progress.WithWidth(min(max(w-24, 10), 40)), progress.WithoutPercentage(),
			progress.WithColorProfile(r.ColorProfile()))
		out = append(out, bar.ViewAs(float64(p.Done)/float64(p.Total))+fmt.Sprintf(" %s %d/%d", p.Step, p.Done, p.Total), "")
	}
	if len(s.Nodes) > 0 {
		out = append(out, "Nodes:")
		for _, n := range s.Nodes {
			mark, word, style := nodeState(st, n, run, p)
			out = append(out, "  "+style.Render(mark+" "+n.Name)+"  "+word)
		}
		out = append(out, "")
	} else if run != nil && run.Action == handover.ActionApply {
		out = append(out, st.muted.Render("Nodes: listed once apply has recorded them."), "")
	}
	if run != nil && len(run.Events) > 0 {
		out = append(out, "Latest:")
		for _, e := range run.Events[max(len(run.Events)-latestShown, 0):] {
			out = append(out, fmt.Sprintf("  [%s %d/%d] %s", e.Step, e.Done, e.Total, e.Message))
		}
	}
	return out
}

// nodeState is a node's place in the hand-over: from the state's record, and the running step's latest
// event for the node it works on.
func nodeState(st styles, n wizard.NodeState, run *wizard.Run, latest handover.Progress) (string, string, lipgloss.Style) {
	current := run != nil && run.Running() && latest.Node == n.Name && (latest.Step == "hand-over" || latest.Step == "hand-back")
	switch {
	case current && run.Action == handover.ActionRollback:
		return "▶", "in progress: handing back", st.info
	case current && !n.HandedOver:
		return "▶", "in progress", st.info
	case n.HandedOver:
		return "✓", "handed over", st.ok
	case run != nil && run.Action == handover.ActionRollback:
		return "·", "with the LVMCluster", st.muted
	}
	return "·", "pending", st.muted
}

func verifyLines(st styles, run *wizard.Run) []string {
	v := run.Verification
	if v == nil {
		return nil
	}
	out := []string{fmt.Sprintf("Compared at step %s: %d node(s), %d LogicalVolume(s), %d PersistentVolume(s), %d StorageClass(es) recorded.",
		v.Step, len(v.Before.Nodes), len(v.Before.LogicalVolumes), len(v.Before.PersistentVolumes), len(v.Before.StorageClasses)), ""}
	if len(v.Differences) == 0 {
		return append(out, st.ok.Render("No difference."))
	}
	out = append(out, st.err.Render(fmt.Sprintf("%d difference(s):", len(v.Differences))))
	for _, d := range v.Differences {
		out = append(out, "  - "+d)
	}
	return out
}
