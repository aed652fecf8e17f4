package diff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
)

// MaxFields caps the fields listed for one changed object.
const MaxFields = 25

// Operations.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// Change is one difference.
type Change struct {
	Op string `json:"op"`
	// Subject names what changed: "LVMNode lvms/worker-b", "node worker-b", "worker-b vg1 /dev/sdb".
	Subject string `json:"subject"`
	Before  string `json:"before,omitempty"`
	After   string `json:"after,omitempty"`
	// Fields lists the changed fields of an object (path: before -> after), at most MaxFields.
	Fields []Field `json:"fields,omitempty"`
	// MoreFields counts the changed fields left out.
	MoreFields int `json:"moreFields,omitempty"`
}

// Field is one changed field of an object.
type Field struct {
	Path   string `json:"path"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// Side describes one of the two bundles.
type Side struct {
	Source  string    `json:"source"`
	Cluster string    `json:"cluster,omitempty"`
	Version string    `json:"version,omitempty"`
	Started time.Time `json:"started"`
}

// Result is everything that changed from A to B.
type Result struct {
	A        Side     `json:"a"`
	B        Side     `json:"b"`
	Objects  []Change `json:"objects"`
	Nodes    []Change `json:"nodes"`
	Devices  []Change `json:"devices"`
	Verdicts []Change `json:"verdicts"`
	Findings []Change `json:"findings"`
}

// Empty reports whether nothing changed.
func (r *Result) Empty() bool {
	return len(r.Objects)+len(r.Nodes)+len(r.Devices)+len(r.Verdicts)+len(r.Findings) == 0
}

// Compare returns what changed from bundle a to bundle b.
func Compare(a, b *bundle.Bundle) *Result {
	r := &Result{A: side(a), B: side(b)}
	r.Objects = compareMaps(objects(a), objects(b), objectChange)
	sa, sb := a.Snapshot(), b.Snapshot()
	r.Nodes = compareMaps(nodeStates(sa), nodeStates(sb), plainChange)
	r.Devices = compareMaps(deviceStates(sa), deviceStates(sb), plainChange)
	r.Verdicts = compareMaps(verdicts(a), verdicts(b), plainChange)
	r.Findings = compareMaps(findings(a), findings(b), plainChange)
	return r
}

func side(b *bundle.Bundle) Side {
	return Side{Source: b.Files.Source, Cluster: b.Manifest.Cluster, Version: b.Manifest.Version, Started: b.Manifest.Started}
}

// compareMaps lists keys only in a (removed), only in b (added), and in both with different values
// (changed, described by change), sorted by key.
func compareMaps[V any](a, b map[string]V, change func(key string, x, y V) (Change, bool)) []Change {
	var out []Change
	for _, k := range union(a, b) {
		x, inA := a[k]
		y, inB := b[k]
		switch {
		case inA && !inB:
			c, _ := change(k, x, x)
			out = append(out, Change{Op: Removed, Subject: k, Before: c.Before})
		case !inA && inB:
			c, _ := change(k, y, y)
			out = append(out, Change{Op: Added, Subject: k, After: c.After})
		default:
			if c, ok := change(k, x, y); ok {
				c.Op, c.Subject = Changed, k
				out = append(out, c)
			}
		}
	}
	return out
}

func union[V any](a, b map[string]V) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func plainChange(_ string, x, y string) (Change, bool) {
	return Change{Before: x, After: y}, x != y
}

// objects flattens every object but events (they change all the time and are listed by the console), keyed
// by "Kind namespace/name".
func objects(b *bundle.Bundle) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, o := range b.Objects {
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "Event" {
			continue
		}
		key := gvk.Kind + " " + o.GetName()
		if o.GetNamespace() != "" {
			key = gvk.Kind + " " + o.GetNamespace() + "/" + o.GetName()
		}
		if gvk.Group != "" {
			key = gvk.Kind + "." + gvk.Group + strings.TrimPrefix(key, gvk.Kind)
		}
		out[key] = flatten(o)
	}
	return out
}

// volatile are fields that change without meaning anything to a person comparing two bundles.
var volatile = []string{"metadata.resourceVersion", "metadata.managedFields", "metadata.uid", "lastHeartbeatTime", "metadata.generation"}

func isVolatile(path string) bool {
	return slices.ContainsFunc(volatile, func(v string) bool {
		return path == v || strings.HasPrefix(path, v+".") || strings.HasSuffix(path, "."+v)
	})
}

// flatten maps every leaf of an object to its JSON value.
func flatten(o client.Object) map[string]string {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return map[string]string{"": err.Error()}
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, child)
			}
		case []any:
			for i, child := range v {
				walk(fmt.Sprintf("%s[%d]", prefix, i), child)
			}
		default:
			if isVolatile(prefix) {
				return
			}
			j, _ := json.Marshal(v)
			out[prefix] = string(j)
		}
	}
	walk("", u)
	return out
}

func objectChange(_ string, x, y map[string]string) (Change, bool) {
	var c Change
	for _, p := range union(x, y) {
		if x[p] == y[p] {
			continue
		}
		if len(c.Fields) == MaxFields {
			c.MoreFields++
			continue
		}
		c.Fields = append(c.Fields, Field{Path: p, Before: x[p], After: y[p]})
	}
	return c, len(c.Fields) > 0
}

// nodeStates: "node <name>" -> "State: message (N differences)".
func nodeStates(s *console.Snapshot) map[string]string {
	out := map[string]string{}
	for _, n := range console.BuildOverview(s).Nodes {
		v := n.State
		if n.Message != "" {
			v += ": " + n.Message
		}
		out["node "+n.Name] = fmt.Sprintf("%s (%d differences)", v, n.Differences)
	}
	return out
}

// deviceStates: "<node> <vg> <device>" -> "state [codes]" as the node statuses report them.
func deviceStates(s *console.Snapshot) map[string]string {
	out := map[string]string{}
	for _, n := range console.BuildOverview(s).Nodes {
		v, err := console.Node(s, n.Name)
		if err != nil {
			continue
		}
		for _, g := range v.VolumeGroups {
			for _, d := range g.Devices {
				var codes []string
				for _, r := range d.Reasons {
					codes = append(codes, r.Code)
				}
				val := string(d.State)
				if len(codes) > 0 {
					val += " [" + strings.Join(codes, ", ") + "]"
				}
				out[n.Name+" "+g.Name+" "+d.KName] = val
			}
		}
	}
	return out
}

// verdicts: the node agents' own verdicts, "<node> <vg> <device>" -> "verdict [codes]".
func verdicts(b *bundle.Bundle) map[string]string {
	out := map[string]string{}
	for node, st := range b.Nodes {
		for _, g := range st.View.Verdicts {
			for _, d := range g.Devices {
				var codes []string
				for _, r := range d.Reasons {
					codes = append(codes, r.Code)
				}
				val := d.Verdict
				if len(codes) > 0 {
					val += " [" + strings.Join(codes, ", ") + "]"
				}
				out[node+" "+g.Name+" "+d.KName] = val
			}
		}
	}
	return out
}

// findings: the analyzers' warn and fail findings of this lvms, keyed by check and what they are about.
func findings(b *bundle.Bundle) map[string]string {
	out := map[string]string{}
	for _, f := range analyze.Run(b) {
		if f.Severity == analyze.Pass {
			continue
		}
		key := strings.Join(nonEmpty(f.CheckName, f.Node, f.VolumeGroup, f.Device), " ")
		if f.InvolvedObject != nil {
			key += " " + f.InvolvedObject.String()
		}
		if prev, dup := out[key]; dup {
			out[key] = prev + "; " + f.Title
			continue
		}
		out[key] = string(f.Severity) + ": " + f.Title
	}
	return out
}

func nonEmpty(s ...string) []string {
	return slices.DeleteFunc(s, func(x string) bool { return x == "" })
}

// WriteText prints the result for a person.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "A: %s (%s, lvms %s, %s)\nB: %s (%s, lvms %s, %s)\n", r.A.Source, r.A.Cluster, r.A.Version, r.A.Started.Format(time.RFC3339),
		r.B.Source, r.B.Cluster, r.B.Version, r.B.Started.Format(time.RFC3339))
	if r.Empty() {
		b.WriteString("\nNo differences.\n")
	}
	for _, sec := range []struct {
		title   string
		changes []Change
	}{{"Findings", r.Findings}, {"Nodes", r.Nodes}, {"Devices (node status)", r.Devices}, {"Device verdicts (node agents)", r.Verdicts}, {"Objects", r.Objects}} {
		if len(sec.changes) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s (%d):\n", sec.title, len(sec.changes))
		for _, c := range sec.changes {
			switch c.Op {
			case Added:
				fmt.Fprintf(&b, "  + %s", c.Subject)
				if c.After != "" {
					fmt.Fprintf(&b, ": %s", c.After)
				}
			case Removed:
				fmt.Fprintf(&b, "  - %s", c.Subject)
				if c.Before != "" {
					fmt.Fprintf(&b, ": %s", c.Before)
				}
			default:
				fmt.Fprintf(&b, "  ~ %s", c.Subject)
				if c.Fields == nil {
					fmt.Fprintf(&b, ": %s -> %s", c.Before, c.After)
				}
			}
			b.WriteString("\n")
			for _, f := range c.Fields {
				fmt.Fprintf(&b, "      %s: %s -> %s\n", f.Path, orNone(f.Before), orNone(f.After))
			}
			if c.MoreFields > 0 {
				fmt.Fprintf(&b, "      ... and %d more fields\n", c.MoreFields)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string { return cmp.Or(s, "(none)") }
