package explain

import (
	"strings"
)

// Severity says how much attention an explanation needs.
type Severity string

// Severities, from least to most urgent.
const (
	// Info: expected and harmless (a boot partition is never used).
	Info Severity = "info"
	// Warning: something may need a change.
	Warning Severity = "warning"
	// Error: storage the spec asks for is not there.
	Error Severity = "error"
)

// Rank orders severities: Info 0, Warning 1, Error 2.
func (s Severity) Rank() int {
	switch s {
	case Error:
		return 2
	case Warning:
		return 1
	}
	return 0
}

// Step is one thing to do next.
type Step struct {
	// Text says what to do and why.
	Text string `json:"text"`
	// Command, when set, is a command to run (on the node, or kubectl/oc against the cluster).
	Command string `json:"command,omitempty"`
}

// Explanation is what the console says about a reason code, a condition or a difference.
type Explanation struct {
	// Code is the reason code, condition type or topic explained.
	Code string `json:"code"`
	// Known is false for codes this console does not know (from a newer agent).
	Known bool `json:"known"`
	// Title is a few words.
	Title string `json:"title"`
	// Why explains, in plain language, what the code means here.
	Why string `json:"why"`
	// Next lists what to do, most likely first.
	Next []Step `json:"next"`
	// Warning is set when a step destroys data; it is shown next to the steps.
	Warning string `json:"warning,omitempty"`
	// Severity of the situation.
	Severity Severity `json:"severity"`
}

// Context fills in commands and sentences with the object at hand.
type Context struct {
	// Node the device or volume group is on.
	Node string
	// Device kernel name or path (/dev/sdb).
	Device string
	// VolumeGroup the device was a candidate for.
	VolumeGroup string
	// Sentence is the agent's own sentence for the reason, shown for unknown codes.
	Sentence string
	// External is true when the node's lvmd.yaml is the host's (configurationPolicy: ExternalConfiguration),
	// not written by the node agent.
	External bool
}

// fill replaces {node}, {device} and {vg} in s. It runs for every reason of every device a view shows, so
// it scans once and allocates only when s has a placeholder.
func (c Context) fill(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 32)
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "{node}"):
			b.WriteString(orDefault(c.Node, "<node>"))
			s = s[len("{node}"):]
		case strings.HasPrefix(s, "{device}"):
			b.WriteString(orDefault(c.Device, "<device>"))
			s = s[len("{device}"):]
		case strings.HasPrefix(s, "{vg}"):
			b.WriteString(orDefault(c.VolumeGroup, "<volume group>"))
			s = s[len("{vg}"):]
		default:
			b.WriteByte('{')
			s = s[1:]
		}
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// render copies an entry of a catalog and fills in the context.
func (e entry) render(code string, c Context) Explanation {
	x := Explanation{Code: code, Known: true, Title: e.title, Why: c.fill(e.why), Warning: c.fill(e.warning),
		Severity: e.severity}
	next := e.next
	if c.External && e.nextExternal != nil {
		next = e.nextExternal
	}
	for _, s := range next {
		x.Next = append(x.Next, Step{Text: c.fill(s.Text), Command: c.fill(s.Command)})
	}
	return x
}

// entry is a catalog entry before its context is filled in.
type entry struct {
	title string
	why   string
	next  []Step
	// nextExternal replaces next for a node whose lvmd.yaml the host owns (configurationPolicy:
	// ExternalConfiguration): advice for the mode the node is in.
	nextExternal []Step
	warning      string
	severity     Severity
	// filter names the node agent's filter that produces a reason code (reason codes only).
	filter string
}

// onNode ends a step whose command runs on the node: how to get a root shell there.
const onNode = " On {node}, open a root shell (for example with \"oc debug node/{node}\" and \"chroot /host\", or over ssh) and run:"

// wipeWarning accompanies every step that removes signatures.
const wipeWarning = "Wiping destroys every byte of data on {device}, irrecoverably. Check with \"lsblk -f {device}\" and " +
	"\"blkid {device}\" that nothing on it is needed, and that you are on the right node, before you wipe."
