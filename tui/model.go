package tui

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/lvms-dev/lvms/console"
)

// Options configure the terminal UI.
type Options struct {
	// Source of snapshots (required). A console.Notifier source (a live cluster) refreshes the view on every
	// change; other sources are polled every Poll.
	Source console.Source
	// Context bounds loading and subscriptions (default context.Background()).
	Context context.Context
	// Renderer styles the output; tests pass one with a fixed colour profile. Default: a renderer for stdout.
	Renderer *lipgloss.Renderer
	// Poll is the refresh period for sources that cannot notify (default 5s).
	Poll time.Duration
	// Bundle, when set, is the support bundle Source reads: the title bar says it is read-only, and
	// ":findings" lists its findings.
	Bundle *Bundle
	// Migration, when set, offers the migration wizard (M, ":migrate"); nil for support bundles.
	Migration *Migration
}

// viewKind is a screen of the UI.
type viewKind int

const (
	viewNodes viewKind = iota
	viewNode
	viewDevice
	viewDeviceClasses
	viewVolumes
	viewEvents
	viewFindings
	viewMigrate
)

// screen is one entry of the navigation stack: a view, what it shows and where the cursor is.
type screen struct {
	kind   viewKind
	node   string
	device string
	cursor int
	filter string
	scroll int
}

// mode is what keys currently do.
type mode int

const (
	modeNormal mode = iota
	modeFilter
	modeJump
)

// Model is the bubbletea model of `lvms tui`.
type Model struct {
	opts   Options
	ctx    context.Context
	st     styles
	keys   keyMap
	help   help.Model
	input  textinput.Model
	mode   mode
	stack  []screen
	width  int
	height int

	snap     *console.Snapshot
	overview *console.Overview
	err      error
	loading  bool
	flash    string
	showHelp bool
	changes  <-chan struct{}
	// mig is the migration screen's state; nil when the wizard is not offered.
	mig *migration
	// itemCache holds the current screen's rows.
	itemCache itemCache
}

// New returns the model; Run starts it in the terminal.
func New(opts Options) *Model {
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.Renderer == nil {
		opts.Renderer = lipgloss.NewRenderer(os.Stdout)
	}
	if opts.Poll <= 0 {
		opts.Poll = 5 * time.Second
	}
	in := textinput.New()
	in.Prompt = ""
	in.CharLimit = 128
	h := help.New()
	m := &Model{opts: opts, ctx: opts.Context, st: newStyles(opts.Renderer), keys: defaultKeys(), help: h, input: in,
		stack: []screen{{kind: viewNodes}}, width: 80, height: 24, loading: true}
	m.help.Styles.ShortKey = m.st.key
	m.help.Styles.FullKey = m.st.key
	m.help.Styles.ShortDesc = m.st.muted
	m.help.Styles.FullDesc = m.st.muted
	if opts.Migration != nil {
		m.mig = &migration{opts: opts.Migration}
	}
	m.keys.Migrate.SetEnabled(m.mig != nil)
	return m
}

// Run runs the UI in the terminal until the user quits or ctx is done.
func Run(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	opts.Context = ctx
	if opts.Renderer == nil {
		opts.Renderer = lipgloss.NewRenderer(out)
	}
	p := tea.NewProgram(New(opts), tea.WithAltScreen(), tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out))
	_, err := p.Run()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("terminal UI: %w", err)
	}
	return nil
}

// Messages.
type (
	snapshotMsg struct {
		snap *console.Snapshot
		err  error
	}
	changedMsg struct{}
	tickMsg    struct{}
)

// Init loads the first snapshot and starts watching for changes.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.load()}
	if n, ok := m.opts.Source.(console.Notifier); ok {
		m.changes = n.Subscribe(m.ctx)
		cmds = append(cmds, m.waitForChange())
	} else {
		cmds = append(cmds, m.tick())
	}
	return tea.Batch(cmds...)
}

func (m *Model) load() tea.Cmd {
	src, ctx := m.opts.Source, m.ctx
	return func() tea.Msg {
		snap, err := src.Snapshot(ctx)
		return snapshotMsg{snap: snap, err: err}
	}
}

// waitForChange waits for the source's next change notification (re-armed after each one).
func (m *Model) waitForChange() tea.Cmd {
	ch := m.changes
	return func() tea.Msg {
		if _, ok := <-ch; !ok {
			return nil
		}
		return changedMsg{}
	}
}

func (m *Model) tick() tea.Cmd {
	return tea.Tick(m.opts.Poll, func(time.Time) tea.Msg { return tickMsg{} })
}

// Update handles a message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = max(msg.Width, 20), max(msg.Height, 5)
		m.help.Width = m.width
		return m, nil
	case snapshotMsg:
		m.loading = false
		m.err = msg.err
		if msg.err == nil && msg.snap != nil {
			// The snapshot is the source's own (not a copy): cluster text is made plain where it is drawn.
			m.snap = msg.snap
			m.overview = console.BuildOverview(msg.snap)
		}
		return m, nil
	case changedMsg:
		return m, tea.Batch(m.load(), m.waitForChange())
	case tickMsg:
		return m, tea.Batch(m.load(), m.tick())
	case migrateClustersMsg, migrateStateMsg, migrateTickMsg:
		return m, m.onMigrateMsg(msg)
	case tea.KeyMsg:
		return m.onKey(msg)
	}
	return m, nil
}

func (m *Model) top() *screen { return &m.stack[len(m.stack)-1] }

func (m *Model) onKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	if key.Matches(msg, m.keys.ForceQuit) {
		return m, tea.Quit
	}
	switch m.mode {
	case modeFilter, modeJump:
		return m.onInputKey(msg)
	}
	m.flash = ""
	if m.top().kind == viewMigrate {
		if handled, cmd := m.onMigrateKey(msg); handled {
			return m, cmd
		}
	}
	s := m.top()
	items := m.items()
	switch {
	case key.Matches(msg, m.keys.Quit):
		if m.holdQuit() {
			return m, nil
		}
		return m, tea.Quit
	case key.Matches(msg, m.keys.Help):
		m.showHelp = !m.showHelp
	case m.showHelp && key.Matches(msg, m.keys.Back):
		m.showHelp = false
	case key.Matches(msg, m.keys.Down):
		s.cursor, s.scroll = min(s.cursor+1, max(len(items)-1, 0)), 0
	case key.Matches(msg, m.keys.Up):
		s.cursor, s.scroll = max(s.cursor-1, 0), 0
	case key.Matches(msg, m.keys.Top):
		s.cursor, s.scroll = 0, 0
	case key.Matches(msg, m.keys.Bottom):
		s.cursor, s.scroll = max(len(items)-1, 0), 0
	case key.Matches(msg, m.keys.ScrollDown):
		s.scroll += m.height / 2
	case key.Matches(msg, m.keys.ScrollUp):
		s.scroll = max(s.scroll-m.height/2, 0)
	case key.Matches(msg, m.keys.Open):
		if s.cursor < len(items) {
			if open := items[s.cursor].opens(); open != nil {
				m.stack = append(m.stack, *open)
			}
		}
	case key.Matches(msg, m.keys.Back):
		switch {
		case s.filter != "":
			s.filter, s.cursor = "", 0
		case len(m.stack) > 1:
			m.stack = m.stack[:len(m.stack)-1]
		}
	case key.Matches(msg, m.keys.Refresh):
		m.flash = "refreshing…"
		return m, m.load()
	case key.Matches(msg, m.keys.Filter):
		m.mode = modeFilter
		m.input.SetValue(s.filter)
		m.input.Focus()
	case key.Matches(msg, m.keys.Jump):
		m.mode = modeJump
		m.input.SetValue("")
		m.input.Focus()
	case key.Matches(msg, m.keys.Migrate):
		return m, m.openMigration("")
	}
	return m, nil
}

// onInputKey edits the filter or the jump command.
func (m *Model) onInputKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch msg.Type {
	case tea.KeyEsc:
		m.mode = modeNormal
		m.input.Blur()
		return m, nil
	case tea.KeyEnter:
		val := strings.TrimSpace(m.input.Value())
		var cmd tea.Cmd
		if m.mode == modeFilter {
			s := m.top()
			s.filter, s.cursor, s.scroll = val, 0, 0
		} else {
			cmd = m.jump(val)
		}
		m.mode = modeNormal
		m.input.Blur()
		if val == "q" || val == "quit" {
			return m, tea.Quit
		}
		return m, cmd
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

// jump runs a ':' command: nodes, node <name>, dc (device classes), volumes, events, migrate [name].
func (m *Model) jump(cmd string) tea.Cmd {
	fields := strings.Fields(cmd)
	if len(fields) == 0 {
		return nil
	}
	switch strings.ToLower(fields[0]) {
	case "nodes", "node", "no", "overview", "o":
		m.stack = []screen{{kind: viewNodes}}
		if len(fields) > 1 {
			m.stack = append(m.stack, screen{kind: viewNode, node: fields[1]})
		}
	case "dc", "deviceclass", "deviceclasses", "classes":
		m.stack = []screen{{kind: viewNodes}, {kind: viewDeviceClasses}}
	case "vol", "volume", "volumes", "lv", "lvs":
		m.stack = []screen{{kind: viewNodes}, {kind: viewVolumes}}
	case "ev", "event", "events":
		m.stack = []screen{{kind: viewNodes}, {kind: viewEvents}}
	case "f", "findings", "analysis":
		if m.opts.Bundle == nil {
			m.flash = "findings are shown for support bundles: lvms tui --bundle FILE"
			return nil
		}
		m.stack = []screen{{kind: viewNodes}, {kind: viewFindings}}
	case "migrate", "migration", "mig":
		name := ""
		if len(fields) > 1 {
			name = fields[1]
		}
		return m.openMigration(name)
	case "q", "quit":
	default:
		m.flash = "unknown command " + fields[0] + ": try nodes, node <name>, dc, volumes, events"
		if m.mig != nil {
			m.flash += ", migrate"
		}
	}
	return nil
}
