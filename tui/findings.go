package tui

import (
	"strings"
	"time"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
)

// Bundle is a support bundle the TUI shows offline (lvms tui --bundle): the title bar says so, and
// ":findings" lists the analyzers' findings.
type Bundle struct {
	// Name is the bundle's file or directory.
	Name string
	// At is when it was collected.
	At time.Time
	// Findings are the analyzers' findings, worst first.
	Findings []analyze.Finding
}

// banner is the title bar's read-only notice for a bundle.
func (b *Bundle) banner() string {
	return "READ-ONLY bundle " + b.Name + " collected " + b.At.UTC().Format("2006-01-02 15:04:05Z")
}

// findingItems lists findings, worst first, with where they are, what is wrong and what to do.
func findingItems(fs []analyze.Finding) []item {
	out := make([]item, 0, len(fs))
	for _, f := range fs {
		h := console.HealthOK
		switch f.Severity {
		case analyze.Fail:
			h = console.HealthError
		case analyze.Warn:
			h = console.HealthWarning
		}
		where := strings.Join(nonEmpty(f.Node, f.VolumeGroup, f.Device), " ")
		it := item{cols: []string{f.CheckName, string(f.Severity), where}, health: h, differs: f.Severity != analyze.Pass}
		it.detail = append(it.detail, strings.ToUpper(string(f.Severity))+" "+f.CheckName+": "+f.Title)
		if f.InvolvedObject != nil {
			it.detail = append(it.detail, "Object: "+f.InvolvedObject.String())
		}
		if where != "" {
			it.detail = append(it.detail, "Where: "+where)
		}
		if len(f.Codes) > 0 {
			it.detail = append(it.detail, "Codes: "+strings.Join(f.Codes, ", "))
		}
		it.detail = append(it.detail, "", f.Message)
		if f.Fix != "" {
			it.detail = append(it.detail, "", "What to do: "+f.Fix)
		}
		if f.Command != "" {
			it.detail = append(it.detail, "  $ "+f.Command)
		}
		if f.Warning != "" {
			it.detail = append(it.detail, "", "Warning: "+f.Warning)
		}
		if f.Node != "" {
			n := f.Node
			it.open = &screen{kind: viewNode, node: n}
			it.detail = append(it.detail, "", "enter: the node's volume groups and devices")
		}
		out = append(out, it)
	}
	return out
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}
