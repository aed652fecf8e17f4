package tui

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/wizard"
)

// Migration lets the TUI guide the migration of an LVMCluster (v1alpha1) to LVMNodeSets (v2alpha1): plan,
// preflight, apply with live progress per node, verify, and roll back.
type Migration struct {
	// Client acts as the user (the kubeconfig's credentials): the wizard offers only what it may do.
	Client client.Client
	// Runner runs the steps in the background. Leaving the screen does not stop a run; quitting the UI
	// does when the runner's life is the UI's context.
	Runner *wizard.Runner
	// Namespace is where LVMClusters are listed when the user may not list them cluster-wide.
	Namespace string
}

const (
	// migrateTick is how often the screen reads the running step's progress.
	migrateTick = time.Second
	// stateEvery is how many ticks pass between two reloads of the migration's state while nothing new
	// happens (every reload asks the API server about each permission).
	stateEvery = 3
)

// migration is the migration screen's state.
type migration struct {
	opts *Migration
	// clusters are the LVMClusters to pick from; picking is whether the list shows.
	clusters []types.NamespacedName
	picking  bool
	pick     int
	// target is the chosen LVMCluster; state and run are its migration and its last run.
	target types.NamespacedName
	state  *wizard.State
	run    *wizard.Run
	cursor int
	scroll int
	// accepted: the user accepted the lossy differences of the plan (key a).
	accepted bool
	// confirm is the step waiting for y.
	confirm handover.Action
	err     error
	loading bool
	// seq numbers state loads, so that a slow, older answer does not overwrite a newer one.
	seq     uint64
	ticking bool
	ticks   int
	// seen is the number and last of the run's events at the last state load.
	seen     int
	seenLast handover.Progress
	// quitArmed: q was pressed once while a step runs; the second q quits.
	quitArmed bool
}

// Messages of the migration screen.
type (
	migrateClustersMsg struct {
		clusters []types.NamespacedName
		err      error
	}
	migrateStateMsg struct {
		seq   uint64
		state *wizard.State
		err   error
	}
	migrateTickMsg struct{}
)

// openMigration shows the migration screen: for the named LVMCluster ("name" or "namespace/name"), the one
// chosen before, or a list to choose from.
func (m *Model) openMigration(name string) tea.Cmd {
	if m.mig == nil {
		m.flash = "the migration wizard needs a live cluster: lvms tui without --bundle"
		return nil
	}
	m.stack = []screen{{kind: viewNodes}, {kind: viewMigrate}}
	mg := m.mig
	mg.err = nil
	if name != "" {
		t := types.NamespacedName{Namespace: mg.opts.Namespace, Name: name}
		if ns, n, ok := strings.Cut(name, "/"); ok {
			t = types.NamespacedName{Namespace: ns, Name: n}
		}
		return m.chooseCluster(t)
	}
	if mg.target.Name != "" && !mg.picking {
		mg.run = m.lastRun()
		return tea.Batch(m.loadMigrationState(), m.ensureTick())
	}
	mg.picking, mg.loading = true, true
	return m.loadClusters()
}

func (m *Model) loadClusters() tea.Cmd {
	c, ns, ctx := m.mig.opts.Client, m.mig.opts.Namespace, m.ctx
	return func() tea.Msg {
		list, err := wizard.Clusters(ctx, c, ns)
		var out []types.NamespacedName
		for _, cl := range list {
			out = append(out, types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name})
		}
		slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		return migrateClustersMsg{clusters: out, err: err}
	}
}

// chooseCluster shows the migration of t.
func (m *Model) chooseCluster(t types.NamespacedName) tea.Cmd {
	mg := m.mig
	if mg.target != t {
		mg.state, mg.accepted, mg.cursor, mg.scroll = nil, false, 0, 0
	}
	mg.target, mg.picking, mg.confirm, mg.err = t, false, "", nil
	mg.run = m.lastRun()
	return tea.Batch(m.loadMigrationState(), m.ensureTick())
}

// loadMigrationState reads the migration's state as the user sees it (its permissions included).
func (m *Model) loadMigrationState() tea.Cmd {
	mg := m.mig
	mg.seq++
	mg.loading = true
	if mg.run != nil {
		mg.seen, mg.seenLast = len(mg.run.Events), latest(mg.run)
	}
	seq, c, r, t, ctx := mg.seq, mg.opts.Client, mg.opts.Runner, mg.target, m.ctx
	return func() tea.Msg {
		st, err := wizard.Load(ctx, c, t.Namespace, t.Name, r.PreflightPassed(t.Namespace, t.Name))
		return migrateStateMsg{seq: seq, state: st, err: err}
	}
}

// lastRun is the last run of the chosen migration, its strings made safe to print.
func (m *Model) lastRun() *wizard.Run {
	t := m.mig.target
	run, ok := m.mig.opts.Runner.Last(t.Namespace, t.Name)
	if !ok {
		return nil
	}
	plainStrings(reflect.ValueOf(&run).Elem())
	return &run
}

// ensureTick starts reading the running step's progress, once.
func (m *Model) ensureTick() tea.Cmd {
	if m.mig.ticking || m.mig.run == nil || !m.mig.run.Running() {
		return nil
	}
	m.mig.ticking = true
	return tea.Tick(migrateTick, func(time.Time) tea.Msg { return migrateTickMsg{} })
}

// onMigrateMsg handles the migration screen's messages.
func (m *Model) onMigrateMsg(msg tea.Msg) tea.Cmd {
	mg := m.mig
	if mg == nil {
		return nil
	}
	switch msg := msg.(type) {
	case migrateClustersMsg:
		mg.loading, mg.err = false, msg.err
		mg.clusters = msg.clusters
		mg.pick = min(mg.pick, max(len(mg.clusters)-1, 0))
		if msg.err == nil && len(msg.clusters) == 1 && mg.picking {
			return m.chooseCluster(msg.clusters[0])
		}
	case migrateStateMsg:
		if msg.seq != mg.seq {
			return nil
		}
		mg.loading, mg.err = false, msg.err
		if msg.err != nil && mg.state != nil {
			m.flash = "the migration could not be reloaded: " + plain(msg.err.Error())
		}
		if msg.err == nil && msg.state != nil {
			plainStrings(reflect.ValueOf(msg.state).Elem())
			mg.state = msg.state
			mg.cursor = min(mg.cursor, max(len(mg.state.Steps)-1, 0))
		}
	case migrateTickMsg:
		mg.ticking = false
		mg.ticks++
		mg.run = m.lastRun()
		if mg.run == nil || !mg.run.Running() {
			return m.loadMigrationState() // the step ended: the state shows what it changed
		}
		cmds := []tea.Cmd{m.ensureTick()}
		// Reload the state when the step moved on (a node was handed over) and now and then, one load at a
		// time: a slow API server would otherwise get ever more loads, each overtaking the last.
		moved := len(mg.run.Events) != mg.seen || latest(mg.run) != mg.seenLast
		if !mg.loading && (moved || mg.ticks%stateEvery == 0) {
			cmds = append(cmds, m.loadMigrationState())
		}
		return tea.Batch(cmds...)
	}
	return nil
}

func latest(r *wizard.Run) handover.Progress {
	p, _ := r.Latest()
	return p
}

// holdQuit keeps the first q from quitting while a step runs: quitting stops it.
func (m *Model) holdQuit() bool {
	mg := m.mig
	if mg == nil || mg.run == nil || !mg.run.Running() || mg.quitArmed {
		return false
	}
	mg.quitArmed = true
	m.flash = wizard.Title(mg.run.Action) + " is running: quitting stops it (apply and roll back resume when run again); q again to quit"
	return true
}

// onMigrateKey handles the keys of the migration screen; it reports false for those the rest of the UI
// handles (quit, help, jump).
func (m *Model) onMigrateKey(msg tea.KeyMsg) (bool, tea.Cmd) {
	mg := m.mig
	if mg == nil || m.showHelp {
		return false, nil
	}
	if !key.Matches(msg, m.keys.Quit) {
		mg.quitArmed = false
	}
	if mg.confirm != "" {
		a := mg.confirm
		mg.confirm = ""
		if msg.String() == "y" {
			return true, m.startStep(a)
		}
		m.flash = wizard.Title(a) + " cancelled"
		return true, nil
	}
	s := msg.String()
	switch {
	case key.Matches(msg, m.keys.Down):
		m.moveMigrationCursor(1)
	case key.Matches(msg, m.keys.Up):
		m.moveMigrationCursor(-1)
	case key.Matches(msg, m.keys.Top):
		m.moveMigrationCursor(-1000)
	case key.Matches(msg, m.keys.Bottom):
		m.moveMigrationCursor(1000)
	case key.Matches(msg, m.keys.ScrollDown):
		mg.scroll += m.height / 2
	case key.Matches(msg, m.keys.ScrollUp):
		mg.scroll = max(mg.scroll-m.height/2, 0)
	case key.Matches(msg, m.keys.Back):
		if !mg.picking && len(mg.clusters) > 1 {
			mg.picking, mg.err = true, nil
			return true, nil
		}
		m.stack = m.stack[:len(m.stack)-1]
	case key.Matches(msg, m.keys.Refresh):
		m.flash = "reloading…"
		if mg.picking {
			mg.loading = true
			return true, m.loadClusters()
		}
		return true, m.loadMigrationState()
	case key.Matches(msg, m.keys.Open):
		if mg.picking {
			if mg.pick < len(mg.clusters) {
				return true, m.chooseCluster(mg.clusters[mg.pick])
			}
			return true, nil
		}
		return true, m.takeStep()
	case key.Matches(msg, m.keys.Filter):
		m.flash = "the migration screen has no filter"
	case s == "a":
		m.acceptLossy()
	case s == "s":
		t := mg.target
		if mg.run != nil && mg.opts.Runner.Stop(t.Namespace, t.Name) {
			m.flash = "stopping " + wizard.Title(mg.run.Action) + ": it ends at its next wait or API call"
		} else {
			m.flash = "no step is running"
		}
	default:
		return false, nil
	}
	return true, nil
}

func (m *Model) moveMigrationCursor(d int) {
	mg := m.mig
	if mg.picking {
		mg.pick = max(min(mg.pick+d, len(mg.clusters)-1), 0)
		return
	}
	if mg.state != nil {
		mg.cursor, mg.scroll = max(min(mg.cursor+d, len(mg.state.Steps)-1), 0), 0
	}
}

func (m *Model) acceptLossy() {
	mg := m.mig
	switch {
	case mg.state == nil || mg.state.Plan == nil:
		m.flash = "there is no plan to accept"
	case !mg.state.Plan.Lossy():
		m.flash = "the plan is exact: there is nothing to accept"
	default:
		mg.accepted = !mg.accepted
		if mg.accepted {
			m.flash = "lossy differences accepted for preflight and apply"
		} else {
			m.flash = "acceptance of the lossy differences taken back"
		}
	}
}

// takeStep starts the step under the cursor, or says why it cannot start.
func (m *Model) takeStep() tea.Cmd {
	mg := m.mig
	if mg.state == nil || mg.cursor >= len(mg.state.Steps) {
		m.flash = "the migration is still loading"
		return nil
	}
	st := mg.state.Steps[mg.cursor]
	lossy := mg.state.Plan != nil && mg.state.Plan.Lossy()
	switch {
	case len(st.Missing) > 0:
		m.flash = fmt.Sprintf("%s needs %d permission(s) you lack (listed on the right)", st.Title, len(st.Missing))
	case !st.Available:
		m.flash = st.Title + ": " + st.Why
	case st.Action == handover.ActionPlan:
		m.flash = "the plan is on the right: ctrl+d/ctrl+u scroll it"
		if lossy {
			m.flash += "; a accepts its lossy differences"
		}
	case mg.run != nil && mg.run.Running():
		m.flash = wizard.Title(mg.run.Action) + " is running: wait for it to end, or press s to stop it"
	case lossy && !mg.accepted && (st.Action == handover.ActionPreflight || st.Action == handover.ActionApply):
		m.flash = "the plan is lossy: read it (Plan), then press a to accept its differences"
	case st.Action == handover.ActionApply || st.Action == handover.ActionRollback:
		mg.confirm = st.Action
	default:
		return m.startStep(st.Action)
	}
	return nil
}

// startStep runs a step in the background and follows its progress.
func (m *Model) startStep(a handover.Action) tea.Cmd {
	mg := m.mig
	by := "lvms tui"
	if m.snap != nil && m.snap.User != "" {
		by = plain(m.snap.User)
	}
	t := mg.target
	if _, err := mg.opts.Runner.Start(mg.opts.Client, t.Namespace, t.Name, a, wizard.Options{AcceptLossy: mg.accepted, By: by}); err != nil {
		if errors.Is(err, wizard.ErrBusy) {
			m.flash = "another step of this migration is running: wait for it to end, or press s to stop it"
		} else {
			m.flash = wizard.Title(a) + " did not start: " + err.Error()
		}
		return nil
	}
	mg.run, mg.scroll, mg.quitArmed = m.lastRun(), 0, false
	if i := slices.IndexFunc(mg.state.Steps, func(s wizard.Step) bool { return s.Action == a }); i >= 0 {
		mg.cursor = i
	}
	return m.ensureTick()
}

// migrationView is what the screen shows now.
func (m *Model) migrationView() migrationView {
	mg := m.mig
	v := migrationView{Picking: mg.picking, Clusters: mg.clusters, Pick: mg.pick, Target: mg.target, State: mg.state, Run: mg.run,
		Cursor: mg.cursor, Scroll: mg.scroll, Accepted: mg.accepted, Confirm: mg.confirm, Loading: mg.loading, ListNamespace: mg.opts.Namespace}
	if mg.err != nil {
		v.Err = plain(mg.err.Error())
	}
	return v
}

// migrationHelp is the help screen's paragraph on the migration screen.
const migrationHelp = "M or :migrate [name] opens the migration of an LVMCluster (v1alpha1) to LVMNodeSets (v2alpha1): " +
	"j/k choose a step, enter runs it (apply and roll back ask y/n first), a accepts a lossy plan, s stops the running step, " +
	"ctrl+d/ctrl+u scroll the detail, r reloads, esc goes back. Quitting stops a running step; apply resumes where it stopped."

// migrationCrumb names the migration screen in the title bar.
func (m *Model) migrationCrumb() string {
	if m.mig == nil || m.mig.picking || m.mig.target.Name == "" {
		return "migrate"
	}
	return "migrate " + m.mig.target.String()
}
