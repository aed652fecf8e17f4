package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/lvms-dev/lvms/console"
)

// View renders the screen: a title bar, the list and detail panes, and the status bar. It always fills
// exactly the terminal's width and height.
func (m *Model) View() string {
	w, h := m.width, m.height
	lines := []string{m.titleBar(w)}
	bodyH := h - 2
	if m.mode != modeNormal {
		bodyH--
	}
	lines = append(lines, m.body(w, bodyH)...)
	if m.mode != modeNormal {
		prompt := "/"
		if m.mode == modeJump {
			prompt = ":"
		}
		lines = append(lines, fit(m.st.key.Render(prompt)+m.input.View(), w))
	}
	lines = append(lines, m.statusBar(w))
	return strings.Join(lines, "\n")
}

func (m *Model) titleBar(w int) string {
	parts := []string{"LVMS"}
	if m.opts.Bundle != nil {
		parts = append(parts, m.opts.Bundle.banner())
	}
	if m.snap != nil {
		if m.snap.Cluster != "" {
			parts = append(parts, m.snap.Cluster)
		}
		if m.snap.User != "" {
			parts = append(parts, "as "+m.snap.User)
		}
	}
	parts = append(parts, m.crumbs())
	return m.st.bar.Render(pad(ansi.Truncate(plain(" "+strings.Join(parts, " · ")), w, "…"), w))
}

// crumbs names the screens of the stack ("nodes › worker-b › /dev/sdb").
func (m *Model) crumbs() string {
	var out []string
	for _, s := range m.stack {
		switch s.kind {
		case viewNodes:
			out = append(out, "nodes")
		case viewNode:
			out = append(out, s.node)
		case viewDevice:
			out = append(out, s.device)
		case viewDeviceClasses:
			out = append(out, "device classes")
		case viewVolumes:
			out = append(out, "volumes")
		case viewEvents:
			out = append(out, "events")
		case viewFindings:
			out = append(out, "findings")
		case viewMigrate:
			out = append(out, m.migrationCrumb())
		}
	}
	return strings.Join(out, " › ")
}

func (m *Model) body(w, h int) []string {
	if m.showHelp {
		paras := []string{m.st.title.Render("Keys"), ""}
		for _, group := range m.keys.FullHelp() {
			for _, b := range group {
				if b.Enabled() {
					paras = append(paras, m.st.key.Render(pad(b.Help().Key, 8))+" "+b.Help().Desc)
				}
			}
		}
		paras = append(paras, "", "Jump (:) to nodes, node <name>, dc (device classes), volumes or events; :q quits.",
			"Rows marked ≠ differ from the desired state; open them for the explanation and what to do next.")
		if m.opts.Bundle != nil {
			paras = append(paras, "", "This is a support bundle, read-only: :findings lists what the analyzers found.")
		}
		if m.mig != nil {
			paras = append(paras, "", migrationHelp)
		}
		return fill(wrapAll(m.opts.Renderer, paras, w), w, h)
	}
	if m.top().kind == viewMigrate && m.mig != nil {
		return m.migrationBody(w, h)
	}
	switch {
	case m.snap == nil && m.err != nil:
		return fill(wrapAll(m.opts.Renderer, []string{m.st.err.Render("The cluster could not be read."), "", capitalise(plain(m.err.Error())) + ".", "",
			"r: retry · q: quit"}, w), w, h)
	case m.snap == nil:
		return fill([]string{"loading…"}, w, h)
	case !m.snap.Installed:
		return fill(wrapAll(m.opts.Renderer, []string{"LVMS is not installed: the cluster does not serve the lvm.topolvm.io APIs (no LVMNodeSet, " +
			"LVMNode or LVMCluster CRDs). Install LVMS; this screen updates by itself."}, w), w, h)
	}
	items := m.items()
	s := m.top()
	if s.cursor >= len(items) {
		s.cursor = max(len(items)-1, 0)
	}
	leftW := min(max(w*2/5, 24), 56)
	if w < 60 {
		leftW = w / 2
	}
	rightW := w - leftW - 1
	left := m.listPane(items, s, leftW, h)
	var detail []string
	if s.cursor < len(items) {
		for _, p := range items[s.cursor].text() {
			detail = append(detail, plain(p))
		}
	}
	right := wrapAll(m.opts.Renderer, detail, rightW)
	if s.scroll > 0 {
		right = right[min(s.scroll, max(len(right)-1, 0)):]
	}
	right = fill(right, rightW, h)
	sep := m.st.border.Render("│")
	out := make([]string, h)
	for i := range h {
		out[i] = left[i] + sep + right[i]
	}
	return out
}

// listPane renders the header and the visible rows, keeping the cursor in view.
func (m *Model) listPane(items []item, s *screen, w, h int) []string {
	title := m.crumbs()
	if len(m.stack) > 1 {
		title = m.crumbs()[strings.LastIndex(m.crumbs(), "› ")+len("› "):]
	}
	rows := h - 1
	off := 0
	if s.cursor >= rows {
		off = s.cursor - rows + 1
	}
	head := fmt.Sprintf("%s (%d)", title, len(items))
	if len(items) > rows { // which rows are on screen, of how many
		head = fmt.Sprintf("%s %d–%d of %d", title, off+1, min(off+rows, len(items)), len(items))
	}
	if s.filter != "" {
		head += " /" + s.filter
	}
	lines := []string{m.st.header.Render(ansi.Truncate(plain(head), w, "…"))}
	if len(items) == 0 {
		lines = append(lines, m.st.muted.Render("nothing to show"))
	}
	for i := off; i < len(items) && i < off+rows; i++ {
		lines = append(lines, m.row(items[i], w, i == s.cursor))
	}
	return fill(lines, w, h)
}

// row renders one list row: the diff marker, the name and the state, coloured by health.
func (m *Model) row(it item, w int, selected bool) string {
	marker := "  "
	if it.differs {
		marker = "≠ "
	}
	cols := it.columns()
	name, rest := plain(cols[0]), plain(strings.Join(cols[1:], " "))
	rest = strings.TrimSpace(rest)
	nameW := max(w-2-lipgloss.Width(rest)-1, 4)
	text := pad(ansi.Truncate(name, nameW, "…"), nameW) + " " + rest
	text = pad(ansi.Truncate(marker+text, w, "…"), w)
	if selected {
		return m.st.selected.Render(text)
	}
	if it.differs {
		return m.st.diff.Render(text[:len(marker)]) + m.healthStyle(it.health).Render(text[len(marker):])
	}
	return m.healthStyle(it.health).Render(text)
}

func (m *Model) healthStyle(h console.Health) lipgloss.Style {
	switch h {
	case console.HealthOK:
		return m.st.ok
	case console.HealthInfo:
		return m.st.info
	case console.HealthWarning:
		return m.st.warn
	case console.HealthError:
		return m.st.err
	}
	return m.st.unknown
}

func (m *Model) statusBar(w int) string {
	var parts []string
	if m.snap != nil {
		parts = append(parts, "snapshot "+m.snap.At.UTC().Format("15:04:05Z"))
	}
	if o := m.overview; o != nil {
		parts = append(parts, fmt.Sprintf("%d/%d nodes ready", o.Totals.NodesReady, o.Totals.Nodes), fmt.Sprintf("%d differ", o.Totals.NodesDiffer))
	}
	switch {
	case m.flash != "":
		parts = append(parts, m.flash)
	case m.err != nil && m.snap != nil:
		parts = append(parts, "refresh failed: "+m.err.Error())
	}
	left := plain(strings.Join(parts, " · "))
	hint := m.help.ShortHelpView(m.keys.ShortHelp())
	if lipgloss.Width(left)+2+lipgloss.Width(hint) > w {
		hint = "? help"
	}
	gap := max(w-lipgloss.Width(left)-lipgloss.Width(hint), 1)
	return ansi.Truncate(left+strings.Repeat(" ", gap)+hint, w, "…")
}

// wrapAll wraps paragraphs to width w.
func wrapAll(r *lipgloss.Renderer, paras []string, w int) []string {
	var out []string
	st := r.NewStyle().Width(w)
	for _, p := range paras {
		if p == "" {
			out = append(out, "")
			continue
		}
		for _, l := range strings.Split(st.Render(p), "\n") {
			out = append(out, strings.TrimRight(l, " "))
		}
	}
	return out
}

// fill pads or cuts lines to exactly h lines of width w.
func fill(lines []string, w, h int) []string {
	out := make([]string, h)
	for i := range h {
		l := ""
		if i < len(lines) {
			l = lines[i]
		}
		out[i] = pad(ansi.Truncate(l, w, "…"), w)
	}
	return out
}

func fit(s string, w int) string { return pad(ansi.Truncate(s, w, "…"), w) }

func pad(s string, w int) string {
	if d := w - lipgloss.Width(s); d > 0 {
		return s + strings.Repeat(" ", d)
	}
	return s
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
