package tui

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/explain"
)

// item is one row of the list pane with what the detail pane shows for it.
type item struct {
	// cols are the row's columns (the first is the name; the last may be empty).
	cols    []string
	health  console.Health
	differs bool
	// detail is the detail pane's text: one entry per paragraph; "" is a blank line.
	detail []string
	open   *screen
	// node, on the nodes screen, is the row's node: its columns, detail and screen are made from it when
	// drawn (nodeDetail makes the detail), so thousands of rows cost one slice until shown.
	node       *console.NodeSummary
	nodeDetail func(*console.NodeSummary) []string
}

// columns returns the row's columns.
func (it item) columns() []string {
	if n := it.node; n != nil {
		return []string{n.Name, n.State, diffCount(n.Differences)}
	}
	return it.cols
}

// text returns the detail pane's paragraphs.
func (it item) text() []string {
	if it.node != nil {
		return it.nodeDetail(it.node)
	}
	return it.detail
}

// opens returns the screen enter opens, nil for none.
func (it item) opens() *screen {
	if it.node != nil {
		return &screen{kind: viewNode, node: it.node.Name}
	}
	return it.open
}

// filterText is what "/" matches against.
func (it item) filterText() string { return strings.ToLower(strings.Join(it.columns(), " ")) }

// itemCache is the rows of one screen of one snapshot: keys and frames reuse them instead of building every
// row (5,000 at 5,000 nodes) again.
type itemCache struct {
	snap                 *console.Snapshot
	kind                 viewKind
	node, device, filter string
	items                []item
}

// items returns the rows of the current screen, filtered.
func (m *Model) items() []item {
	if m.snap == nil || !m.snap.Installed {
		return nil
	}
	s := m.top()
	c := &m.itemCache
	if c.snap != m.snap || c.kind != s.kind || c.node != s.node || c.device != s.device || c.filter != s.filter {
		*c = itemCache{snap: m.snap, kind: s.kind, node: s.node, device: s.device, filter: s.filter, items: m.buildItems(s)}
	}
	return c.items
}

func (m *Model) buildItems(s *screen) []item {
	var all []item
	switch s.kind {
	case viewNodes:
		all = m.nodeItems()
	case viewNode:
		all = m.deviceItems(s.node)
	case viewDevice:
		all = m.reasonItems(s.node, s.device)
	case viewDeviceClasses:
		all = classItems(console.DeviceClasses(m.snap))
	case viewVolumes:
		all = volumeItems(console.Volumes(m.snap))
	case viewEvents:
		all = eventItems(console.Events(m.snap))
	case viewFindings:
		if m.opts.Bundle != nil {
			all = findingItems(m.opts.Bundle.Findings)
		}
	}
	if s.filter == "" {
		return all
	}
	f := strings.ToLower(s.filter)
	var out []item
	for _, it := range all {
		if strings.Contains(it.filterText(), f) {
			out = append(out, it)
		}
	}
	return out
}

func (m *Model) nodeItems() []item {
	o := m.overview
	detail := func(n *console.NodeSummary) []string {
		out := []string{"Node " + n.Name + ": " + n.State, n.Message, "From " + refs(n.Owners) + ".",
			fmt.Sprintf("%d volume groups, %d devices in use, %d excluded, %d missing.", n.VolumeGroups, n.DevicesInUse, n.Excluded, n.Missing), ""}
		// The node's first four differences, in the overview's order (worst first).
		shown := 0
		for _, d := range o.Differences {
			if shown == 4 {
				break
			}
			if d.Node != n.Name {
				continue
			}
			shown++
			out = append(out, "≠ "+where(d)+": "+d.Explanation.Title, "  desired "+d.Desired+"; actual "+d.Actual)
		}
		if more := n.Differences - shown; more > 0 { // the count in the list says how many there are
			out = append(out, fmt.Sprintf("… and %d more: enter shows them all.", more))
		}
		if n.Differences == 0 {
			out = append(out, "Actual state matches desired state.")
		}
		return append(out, "", "enter: volume groups and devices")
	}
	out := make([]item, len(o.Nodes))
	for i := range o.Nodes {
		n := &o.Nodes[i]
		out[i] = item{node: n, nodeDetail: detail, health: n.Health, differs: n.Differences > 0}
	}
	return out
}

func diffCount(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d≠", n)
}

func where(d console.Difference) string {
	parts := []string{}
	for _, p := range []string{d.VolumeGroup, d.DeviceClass, d.Device} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return d.Node
	}
	return strings.Join(parts, " ")
}

func refs(rs []console.Ref) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	if len(out) == 0 {
		return "no visible set or cluster"
	}
	return strings.Join(out, ", ")
}

// deviceItems lists a node's devices per volume group, then its thin pools and device classes.
func (m *Model) deviceItems(node string) []item {
	v, err := console.Node(m.snap, node)
	if err != nil {
		return []item{{cols: []string{"node " + node + " not found", ""}, health: console.HealthError,
			detail: []string{err.Error() + ".", "", "esc: back to the nodes"}}}
	}
	out := sharedItems(v)
	for _, g := range v.VolumeGroups {
		for _, r := range g.Devices {
			it := item{cols: []string{g.Name + " " + r.KName, stateText(r.State)}, health: r.Health, differs: r.Differs,
				open: &screen{kind: viewDevice, node: node, device: r.KName}}
			it.detail = []string{r.KName + " in volume group " + g.Name + " (" + g.Source.String() + ")",
				"Desired: " + r.Desired, "Actual: " + r.Actual, ""}
			if r.Path != "" {
				// The name the user wrote comes first: that is the disk they are asking about.
				it.cols[0] = g.Name + " " + r.Path + " → " + r.KName
				it.detail[0] = r.Path + " (" + r.KName + ") in volume group " + g.Name + " (" + g.Source.String() + ")"
			}
			if r.Topic != nil {
				it.detail = append(it.detail, explanationText(*r.Topic)...)
			}
			for _, rs := range r.Reasons {
				it.detail = append(it.detail, rs.Code+": \""+rs.Sentence+"\"")
				it.detail = append(it.detail, explanationText(rs.Explanation)...)
			}
			it.detail = append(it.detail, "enter: every filter's verdict")
			out = append(out, it)
		}
		for _, p := range g.Pools {
			it := item{cols: []string{g.Name + " pool " + p.Name, "meta " + pct(p.MetadataPercent)}, health: p.Health, differs: len(p.Findings) > 0}
			it.detail = []string{"Thin pool " + p.Name + " in " + g.Name, "Data     " + usageBar(p.DataPercent, p.DataThreshold), "Metadata " + usageBar(p.MetadataPercent, p.MetadataThreshold),
				"At a limit (|) no new volume is placed on the pool.", ""}
			if !p.Reported {
				it.cols[1] = "not reported"
				it.detail = []string{"Thin pool " + p.Name + " in " + g.Name + ": not reported by the node agent", ""}
			}
			for _, f := range p.Findings {
				it.detail = append(it.detail, explanationText(f.Explanation)...)
			}
			out = append(out, it)
		}
	}
	for _, dc := range v.DeviceClasses {
		it := item{cols: []string{"class " + dc.Name, dc.State}, health: dc.Health}
		it.detail = []string{"Device class " + dc.Name + " on " + dc.VolumeGroup + " (" + dc.Strategy + "): " + dc.State, dc.Message}
		if dc.Capacity != nil {
			it.detail = append(it.detail, "Capacity: "+capacityLine(*dc.Capacity))
		}
		for i, c := range []*console.ClassCheck{dc.StorageClass, dc.SnapshotClass} {
			if c == nil {
				continue
			}
			it.detail = append(it.detail, classLine(classKinds[i], c))
			if c.Differs {
				it.differs = true
				if c.Topic != nil {
					it.detail = append(it.detail, explanationText(*c.Topic)...)
				}
			}
		}
		out = append(out, it)
	}
	out = append(out, groupSnapshotItems(v.GroupSnapshots)...)
	for _, c := range v.Conditions {
		if c.Explanation == nil {
			continue
		}
		it := item{cols: []string{"condition " + c.Type, c.Status}, health: console.HealthWarning}
		on := ""
		if c.Object != nil { // a node's LVMNode and v1 object may carry conditions of one type
			it.cols[0] += " on " + c.Object.Kind
			on = " (on " + c.Object.Kind + " " + c.Object.Name + ")"
		}
		it.detail = append([]string{c.Type + " is " + c.Status + on + ": " + c.Message, ""}, explanationText(*c.Explanation)...)
		out = append(out, it)
	}
	return out
}

func stateText(s console.DeviceState) string {
	if s == console.DeviceInVG {
		return "in VG"
	}
	return string(s)
}

// classKinds names the classes a device class is checked against, in the order the views list them.
var classKinds = [...]string{"StorageClass", "VolumeSnapshotClass"}

// classLine is one class check: "StorageClass lvms-vg1: exists".
func classLine(kind string, c *console.ClassCheck) string {
	switch {
	case c.Unknown != "":
		return kind + " " + c.Name + ": cannot be known (" + c.Unknown + ")"
	case !c.Differs:
		return kind + " " + c.Name + ": exists"
	case c.InCluster:
		return "≠ " + kind + " " + c.Name + ": exists but provisions from elsewhere"
	}
	return "≠ " + kind + " " + c.Name + ": missing from the cluster"
}

// reasonItems lists a device's reasons per volume group and every filter's verdict.
func (m *Model) reasonItems(node, kname string) []item {
	v, err := console.Device(m.snap, node, kname)
	if err != nil {
		return []item{{cols: []string{kname + " not found", ""}, health: console.HealthError,
			detail: []string{err.Error() + ".", "", "esc: back to the node"}}}
	}
	var out []item
	for _, e := range v.Entries {
		sum := item{cols: []string{e.VolumeGroup + " summary", stateText(e.Row.State)}, health: e.Row.Health, differs: e.Row.Differs,
			detail: []string{kname + " on " + node + ", volume group " + e.VolumeGroup, "Desired: " + e.Row.Desired, "Actual: " + e.Row.Actual, ""}}
		if e.Row.Topic != nil {
			sum.detail = append(sum.detail, explanationText(*e.Row.Topic)...)
		}
		out = append(out, sum)
		for _, rs := range e.Row.Reasons {
			it := item{cols: []string{e.VolumeGroup + " " + rs.Code, "excluded"}, health: healthOfSeverity(rs.Explanation.Severity)}
			it.detail = append([]string{"Node agent: \"" + rs.Sentence + "\"", ""}, explanationText(rs.Explanation)...)
			out = append(out, it)
		}
		vd := item{cols: []string{e.VolumeGroup + " verdicts", ""}, health: console.HealthInfo}
		vd.detail = []string{"Every filter's verdict, in the node agent's order:"}
		for _, x := range e.Verdicts {
			line := fmt.Sprintf("%-13s %-24s %s", x.Outcome, x.Code, x.Filter)
			vd.detail = append(vd.detail, line)
		}
		out = append(out, vd)
	}
	return out
}

// explanationText renders an explanation as paragraphs.
func explanationText(x explain.Explanation) []string {
	out := []string{x.Title + ".", x.Why}
	if x.Warning != "" {
		out = append(out, "WARNING: "+x.Warning)
	}
	for i, s := range x.Next {
		out = append(out, fmt.Sprintf("%d. %s", i+1, s.Text))
		if s.Command != "" {
			out = append(out, "   $ "+s.Command)
		}
	}
	return append(out, "")
}

func classItems(dcs []console.DeviceClassView) []item {
	out := make([]item, 0, len(dcs))
	for _, d := range dcs {
		it := item{cols: []string{d.Name, d.Strategy}, health: d.Health, differs: len(d.Differences) > 0}
		kind := d.Strategy
		if d.Default { // as kubectl marks the default StorageClass
			it.cols[0], kind = d.Name+" (default)", kind+", default"
		}
		it.detail = []string{"Device class " + d.Name + " (" + kind + ") on volume group " + d.VolumeGroup, "From " + d.Source.String() + ".",
			"Capacity: " + capacityLine(d.Capacity)}
		for i, c := range []*console.ClassCheck{d.StorageClass, d.SnapshotClass} {
			if c != nil {
				it.detail = append(it.detail, classLine(classKinds[i], c))
			}
		}
		it.detail = append(it.detail, "")
		for _, df := range d.Differences {
			it.detail = append(it.detail, explanationText(df.Explanation)...)
		}
		for _, n := range d.Nodes {
			line := "  " + n.Source.Name + ": " + n.State
			if n.Message != "" {
				line += " — " + n.Message
			}
			if n.Capacity != nil {
				line += "; " + capacityLine(*n.Capacity)
			}
			it.detail = append(it.detail, line)
		}
		out = append(out, it)
	}
	return out
}

func volumeItems(vs []console.VolumeView) []item {
	out := make([]item, 0, len(vs))
	for _, v := range vs {
		it := item{cols: []string{v.Name, v.Node}, health: v.Health, differs: v.Topic != nil}
		it.detail = []string{"LogicalVolume " + v.Name + " on " + v.Node + ", device class " + v.DeviceClass + ", " + v.Size.Human}
		switch {
		case v.Name == "":
			// A claim without a volume yet.
			it.cols = []string{"(claim " + v.PVC + ")", orNone(v.Node)}
			it.detail = []string{"Claim " + v.PVC + " has no volume yet: StorageClass " + v.StorageClass + ", " + v.Size.Human +
				", node " + cmp.Or(v.Node, "not chosen yet")}
		case v.SharedVolumeGroup != "":
			it.cols[1] = sharedVolumeCol(v)
			it.detail = []string{"LogicalVolume " + v.Name + " in shared volume group " + v.SharedVolumeGroup + ", device class " + v.DeviceClass + ", " + v.Size.Human,
				"Active on: " + console.ActiveOnText(v.ActiveOn)}
		}
		it.detail = append(it.detail, "PersistentVolume: "+orNone(v.PV)+" "+v.PVPhase, "Claim: "+orNone(v.PVC)+" "+v.PVCPhase,
			"Pods: "+orNone(strings.Join(v.Pods, ", ")), "")
		if v.Move != nil {
			it.detail = append(it.detail, moveText(v)...)
		}
		if v.Topic != nil {
			it.detail = append(it.detail, explanationText(*v.Topic)...)
		}
		out = append(out, it)
	}
	return out
}

func eventItems(es []console.EventView) []item {
	out := make([]item, 0, len(es))
	for _, e := range es {
		it := item{cols: []string{e.Reason, e.Type}, health: e.Health}
		it.detail = []string{e.Time.UTC().Format("2006-01-02 15:04:05Z") + " " + e.Type + " " + e.Reason, e.Object.String(), "", e.Message,
			fmt.Sprintf("(%d times)", e.Count)}
		out = append(out, it)
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func pct(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", *p)
}

func capacityLine(c console.Capacity) string { return c.Text() }

// usageBar is a thin pool usage as a 20-cell bar with its threshold marked: "[██████░░░░░░░░░░|░░] 30.0% (limit 90%)".
func usageBar(p *float64, threshold float64) string {
	const width = 20
	used := 0
	if p != nil {
		used = min(max(int(*p/100*width+0.5), 0), width)
	}
	at := min(max(int(threshold/100*width+0.5), 0), width)
	var b strings.Builder
	b.WriteString("[")
	for i := range width {
		switch {
		case i == at:
			b.WriteString("|")
		case i < used:
			b.WriteString("█")
		default:
			b.WriteString("░")
		}
	}
	b.WriteString("] " + pct(p) + " (limit " + strconv.FormatFloat(threshold, 'f', -1, 64) + "%)")
	return b.String()
}

func healthOfSeverity(s explain.Severity) console.Health {
	switch s {
	case explain.Error:
		return console.HealthError
	case explain.Warning:
		return console.HealthWarning
	}
	return console.HealthInfo
}

// groupSnapshotItems are a node's group snapshots: one row each, the detail pane listing its members.
func groupSnapshotItems(gs []console.GroupSnapshotView) []item {
	out := make([]item, 0, len(gs))
	for _, g := range gs {
		it := item{cols: []string{"group snapshot " + g.Name, g.Phase}, health: g.Health,
			differs: g.Health == console.HealthWarning || g.Health == console.HealthError}
		head := "Group snapshot " + g.Name + ": " + g.Phase
		if g.VolumeGroupSnapshot != "" {
			head += ", VolumeGroupSnapshot " + g.VolumeGroupSnapshot
		}
		it.detail = []string{head, "Device class " + orDefault(g.DeviceClass) + "; " + g.MembersText() + "."}
		if st := g.SuspendText(); st != "" {
			it.detail = append(it.detail, "Volumes suspended together for "+st+".")
		}
		if g.Message != "" {
			msg := g.Message
			if g.Reason != "" {
				msg = g.Reason + ": " + msg
			}
			it.detail = append(it.detail, "Agent: \""+msg+"\"")
		}
		it.detail = append(it.detail, "", "Members:")
		for _, m := range g.Members {
			line := "  " + m.Snapshot + " ← " + m.Source
			if m.SourcePVC != "" {
				line += " (claim " + m.SourcePVC + ")"
			}
			size := "-"
			if m.Size != nil {
				size = m.Size.Human
			}
			state := "not ready"
			switch {
			case m.Ready:
				state = "ready"
			case !m.Exists:
				state = "no LogicalVolume"
			}
			line += ", " + size + ", " + state
			if !m.Listed {
				line += " (labelled as a member, not in the group's spec)"
			}
			if m.Message != "" {
				line += ": " + m.Message
			}
			it.detail = append(it.detail, line)
		}
		out = append(out, it)
	}
	return out
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// moveText is a claim's move to another node in the volume's detail pane.
func moveText(v console.VolumeView) []string {
	m := v.Move
	if m.Error != "" {
		return []string{"Move: " + m.Error, ""}
	}
	line := "Move: requested"
	switch {
	case m.Phase != "":
		line = "Move " + m.ID + ": " + m.Phase + " to " + m.TargetNode
	case m.Requested != "":
		line += " to " + m.Requested
	}
	if m.Progress != "" {
		line += ", copied " + m.Progress + " chunks"
	}
	out := []string{line}
	if m.Message != "" {
		out = append(out, "  "+m.Message)
	}
	if m.CanConfirm {
		out = append(out, "  Release the source volume: lvms move confirm "+v.ClaimName+" -n "+v.ClaimNamespace+" --id "+m.ID)
	}
	return append(out, "")
}
