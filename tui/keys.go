package tui

import (
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"
)

// keyMap holds the k9s-style keys; help renders from it.
type keyMap struct {
	Up, Down, Top, Bottom, Open, Back, ScrollDown, ScrollUp key.Binding
	Filter, Jump, Refresh, Help, Quit, ForceQuit            key.Binding
	// Migrate opens the migration wizard; disabled when the UI has none (support bundles).
	Migrate key.Binding
}

func defaultKeys() keyMap {
	return keyMap{
		Up:         key.NewBinding(key.WithKeys("k", "up"), key.WithHelp("k/↑", "up")),
		Down:       key.NewBinding(key.WithKeys("j", "down"), key.WithHelp("j/↓", "down")),
		Top:        key.NewBinding(key.WithKeys("g", "home"), key.WithHelp("g", "top")),
		Bottom:     key.NewBinding(key.WithKeys("G", "end"), key.WithHelp("G", "bottom")),
		Open:       key.NewBinding(key.WithKeys("enter", "l", "right"), key.WithHelp("enter", "open")),
		Back:       key.NewBinding(key.WithKeys("esc", "h", "left"), key.WithHelp("esc", "back")),
		ScrollDown: key.NewBinding(key.WithKeys("ctrl+d", "pgdown"), key.WithHelp("ctrl+d", "scroll detail")),
		ScrollUp:   key.NewBinding(key.WithKeys("ctrl+u", "pgup"), key.WithHelp("ctrl+u", "scroll back")),
		Filter:     key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Jump:       key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "jump")),
		Refresh:    key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh")),
		Help:       key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:       key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
		ForceQuit:  key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
		Migrate:    key.NewBinding(key.WithKeys("M"), key.WithHelp("M", "migrate an LVMCluster to v2alpha1")),
	}
}

// ShortHelp is the one-line help of the status bar.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Down, k.Open, k.Back, k.Filter, k.Jump, k.Help, k.Quit}
}

// FullHelp is the help screen.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.Top, k.Bottom},
		{k.Open, k.Back, k.ScrollDown, k.ScrollUp},
		{k.Filter, k.Jump, k.Refresh, k.Migrate, k.Help, k.Quit},
	}
}

// styles are built from one renderer, so tests can fix the colour profile without global state.
type styles struct {
	title, header, selected, muted, key, bar, flash lipgloss.Style
	ok, info, warn, err, unknown, diff, border      lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	s := r.NewStyle
	return styles{
		title:    s().Bold(true),
		header:   s().Bold(true).Foreground(lipgloss.AdaptiveColor{Light: "#151515", Dark: "#e0e0e0"}),
		selected: s().Reverse(true),
		muted:    s().Foreground(lipgloss.AdaptiveColor{Light: "#6a6e73", Dark: "#a0a0a0"}),
		key:      s().Bold(true).Foreground(lipgloss.AdaptiveColor{Light: "#0066cc", Dark: "#73bcf7"}),
		bar:      s().Reverse(true),
		flash:    s().Bold(true).Foreground(lipgloss.AdaptiveColor{Light: "#c9190b", Dark: "#f0564a"}),
		ok:       s().Foreground(lipgloss.AdaptiveColor{Light: "#3e8635", Dark: "#5ba352"}),
		info:     s().Foreground(lipgloss.AdaptiveColor{Light: "#2b9af3", Dark: "#73bcf7"}),
		warn:     s().Foreground(lipgloss.AdaptiveColor{Light: "#b58100", Dark: "#f0ab00"}),
		err:      s().Foreground(lipgloss.AdaptiveColor{Light: "#c9190b", Dark: "#f0564a"}),
		unknown:  s().Foreground(lipgloss.AdaptiveColor{Light: "#6a6e73", Dark: "#a0a0a0"}),
		diff:     s().Bold(true).Foreground(lipgloss.AdaptiveColor{Light: "#c9190b", Dark: "#f0564a"}),
		border:   s().Foreground(lipgloss.AdaptiveColor{Light: "#d2d2d2", Dark: "#444548"}),
	}
}
