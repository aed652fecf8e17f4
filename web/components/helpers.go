package components

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/explain"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/words"
)

// Page is what the layout needs besides the content.
type Page struct {
	Title string
	// Nav is the active navigation entry: overview, deviceclasses, volumes or events.
	Nav     string
	Cluster string
	User    string
	At      time.Time
	// LiveURL is polled every few seconds to refresh the content; empty disables live refresh.
	LiveURL string
	// HTMX is the vendored htmx file name under /assets/.
	HTMX string
	// Bundle is set when the console shows a support bundle instead of a live cluster.
	Bundle *BundleBanner
	// Migration shows the migration wizard in the navigation.
	Migration bool
}

// BundleBanner says which support bundle a read-only console shows.
type BundleBanner struct {
	Name string
	At   time.Time
}

// NodeURL is the page of a node.
func NodeURL(node string) templ.SafeURL { return templ.SafeURL("/nodes/" + url.PathEscape(node)) }

// NodeDiffURL is the node page with the diff view open.
func NodeDiffURL(node string) templ.SafeURL {
	return templ.SafeURL("/nodes/" + url.PathEscape(node) + "?view=diff")
}

// DevicePath is a device's kernel name as it appears in URLs: without /dev/, each segment escaped
// ("/dev/mapper/x" -> "mapper/x"); other names are escaped whole.
func DevicePath(kname string) string {
	rest, ok := strings.CutPrefix(kname, "/dev/")
	if !ok {
		return url.PathEscape(kname)
	}
	segs := strings.Split(rest, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// DeviceURL is the page of a device of a node.
func DeviceURL(node, kname string) templ.SafeURL {
	return templ.SafeURL("/nodes/" + url.PathEscape(node) + "/devices/" + DevicePath(kname))
}

// HealthClass is the CSS class of a health.
func HealthClass(h console.Health) string { return "h-" + string(h) }

// SeverityClass is the CSS class of an explanation's severity.
func SeverityClass(s explain.Severity) string { return "s-" + string(s) }

// StateHealth is the health of a state string, for chips.
func StateHealth(state string) console.Health {
	switch state {
	case "Ready", "Healthy", "Exists", "Bound", "Normal", "True":
		return console.HealthOK
	case "Progressing", "Deleting", "Pending":
		return console.HealthInfo
	case "Degraded", "Warning", "Released":
		return console.HealthWarning
	case "Failed", "Missing", "Conflict", "Not reported", "False", "Lost":
		return console.HealthError
	}
	return console.HealthUnknown
}

// DeviceStateText is a device state for people.
func DeviceStateText(s console.DeviceState) string {
	switch s {
	case console.DeviceInVG:
		return "in VG"
	case console.DeviceWiped:
		return "in VG (wiped)"
	}
	return string(s)
}

// DeviceStateHealth colours a device state chip.
func DeviceStateHealth(r console.DeviceRow) console.Health {
	switch r.State {
	case console.DeviceInVG, console.DeviceWiped:
		return console.HealthOK
	case console.DeviceExcluded:
		if r.Differs {
			return r.Health
		}
		return console.HealthInfo
	}
	return r.Health
}

// Pct formats a percentage.
func Pct(p *float64) string {
	if p == nil {
		return "–"
	}
	return strconv.FormatFloat(*p, 'f', 1, 64) + "%"
}

// When formats a time in UTC.
func When(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// Itoa formats an int.
func Itoa[T ~int | ~int32 | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

// BytesText formats an optional size.
func BytesText(b *console.Bytes) string {
	if b == nil {
		return "–"
	}
	return b.Human
}

// Or returns s, or def when s is empty.
func Or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Refs joins object references for display.
func Refs(rs []console.Ref) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return strings.Join(out, ", ")
}

// chart geometry: a bar of BarWidth pixels per row.
const (
	BarWidth  = 360
	BarHeight = 14
	RowHeight = 40
	LabelX    = 0
)

// Frac is n/of scaled to width pixels, clamped to [0, width].
func Frac(n, of int64, width int) int {
	if of <= 0 || n <= 0 {
		return 0
	}
	w := int(float64(n) / float64(of) * float64(width))
	return min(max(w, 0), width)
}

// PctWidth is a percentage of width pixels, clamped.
func PctWidth(p *float64, width int) int {
	if p == nil {
		return 0
	}
	return min(max(int(*p/100*float64(width)), 0), width)
}

// ThresholdX is the x of a usage bar's threshold line.
func ThresholdX(threshold float64) int { return min(max(int(threshold/100*BarWidth), 0), BarWidth) }

// S formats an int as an SVG attribute.
func S(n int) string { return strconv.Itoa(n) }

// UsageHealth colours a thin pool usage bar by its threshold: a warning from explain.ThinNearMargin points
// below, an error at it (new volumes are refused).
func UsageHealth(p *float64, threshold float64) console.Health {
	switch {
	case p == nil:
		return console.HealthUnknown
	case *p >= threshold:
		return console.HealthError
	case *p >= threshold-explain.ThinNearMargin:
		return console.HealthWarning
	}
	return console.HealthOK
}

// Number formats a float with no needless digits.
func Number(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// ThresholdText is a usage bar's threshold in words.
func ThresholdText(threshold float64) string { return "limit " + Number(threshold) + "%" }

// CapacityLine describes a capacity in words.
func CapacityLine(c console.Capacity) string { return c.Text() }

// DiffLine is one line of the diff view.
type DiffLine struct {
	// Op is "-" (desired, not actual), "+" (actual, not desired), " " (both) or "@" (a header).
	Op   string
	Text string
}

// VGDiff renders a volume group's desired vs actual devices as diff lines: named or matched devices that are
// in the volume group are context, desired devices not in it are removed lines, devices in it but not
// desired are added lines.
func VGDiff(g console.VolumeGroupView) []DiffLine {
	lines := []DiffLine{{Op: "@", Text: "volume group " + g.Name + " on " + g.Source.String() + " — desired: " + g.Desired}}
	if !g.InSpec {
		lines = append(lines, DiffLine{Op: "+", Text: "volume group " + g.Name + " (reported, not in spec)"})
	}
	if !g.Reported {
		lines = append(lines, DiffLine{Op: "-", Text: "volume group " + g.Name + " (in spec, not reported)"})
	}
	for _, r := range g.Devices {
		switch {
		case r.State == console.DeviceUnexpected:
			lines = append(lines, DiffLine{Op: "+", Text: r.KName + "  (" + r.Actual + ")"})
		case r.Differs:
			lines = append(lines, DiffLine{Op: "-", Text: r.KName + "  (" + r.Desired + "; " + r.Actual + ")"})
		case r.State == console.DeviceInVG || r.State == console.DeviceWiped:
			lines = append(lines, DiffLine{Op: " ", Text: r.KName})
		}
	}
	for _, p := range g.Pools {
		for _, f := range p.Findings {
			lines = append(lines, DiffLine{Op: "-", Text: "thin pool " + p.Name + ": " + f.Desired}, DiffLine{Op: "+", Text: "thin pool " + p.Name + ": " + f.Actual})
		}
	}
	return lines
}

// DiffClass is the CSS class of a diff line.
func DiffClass(op string) string {
	switch op {
	case "-":
		return "del"
	case "+":
		return "add"
	case "@":
		return "hdr"
	}
	return "ctx"
}

// FindingHealth maps an analyzer severity to the console's health colours.
func FindingHealth(s analyze.Severity) console.Health {
	switch s {
	case analyze.Fail:
		return console.HealthError
	case analyze.Warn:
		return console.HealthWarning
	}
	return console.HealthOK
}

// FindingClass is the row class of a finding: problems stand out, passes do not.
func FindingClass(s analyze.Severity) string {
	if s == analyze.Pass {
		return ""
	}
	return "differs " + HealthClass(FindingHealth(s))
}

// NodePageText says which nodes the overview lists and how many it does not: "Nodes 1–100 of 5000, the ones
// that need attention first; 4900 more on the next pages."
func NodePageText(v OverviewView) string {
	of := ""
	if v.Filter != "" {
		of = " matching \"" + v.Filter + "\""
	}
	if len(v.Nodes) == v.NodesTotal {
		if v.NodesTotal == 1 {
			return "The only node" + of + "."
		}
		return "All " + words.Count(v.NodesTotal, "node", "nodes") + of + ", the ones that need attention first."
	}
	of = " nodes" + of
	t := "Nodes " + Itoa(v.NodesFrom+1) + "–" + Itoa(v.NodesFrom+len(v.Nodes)) + " of " + Itoa(v.NodesTotal) + of +
		", the ones that need attention first"
	if after := v.NodesTotal - v.NodesFrom - len(v.Nodes); after > 0 {
		t += "; " + Itoa(after) + " more on the next pages"
	}
	if v.NodesFrom > 0 {
		t += "; " + Itoa(v.NodesFrom) + " on the previous pages"
	}
	return t + "."
}
