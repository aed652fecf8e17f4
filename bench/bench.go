// Package bench holds LVMS's performance figures: what each one is, which Go benchmark and metric measure
// it and its goal. It reads `go test -bench` output into results and renders them as the table the README
// shows and as bench/results.json. `make bench` (bench/run) runs the benchmarks.
package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/lvms-dev/lvms/docsection"
)

// Figure is one promised number.
type Figure struct {
	Name  string // stable identifier, the key in results.json
	Title string // what a reader of the table is told
	// Package, Benchmark (without the "Benchmark" prefix, with sub-benchmark parts) and Metric (the unit
	// passed to b.ReportMetric) say where the value comes from.
	Package, Benchmark, Metric string
	Unit                       string
	Goal                       *Goal // nil: reported, no goal
	// Derived computes the value from other figures instead of a benchmark.
	Derived func(values map[string]float64) (float64, bool)
}

// Goal is the bound a figure must stay within.
type Goal struct {
	Op    string  `json:"op"` // "<" or "<="
	Value float64 `json:"value"`
}

// Below is a strict upper bound; AtMost an inclusive one.
func Below(v float64) *Goal  { return &Goal{Op: "<", Value: v} }
func AtMost(v float64) *Goal { return &Goal{Op: "<=", Value: v} }

// Met reports whether v is within the goal.
func (g *Goal) Met(v float64) bool {
	if g.Op == "<" {
		return v < g.Value
	}
	return v <= g.Value
}

func (g *Goal) String() string {
	op := "<"
	if g.Op == "<=" {
		op = "≤"
	}
	return op + " " + formatValue(g.Value)
}

// Exponent derives k in value ∝ n^k from a figure measured at two sizes.
func Exponent(small, large string, nSmall, nLarge float64) func(map[string]float64) (float64, bool) {
	return func(v map[string]float64) (float64, bool) {
		a, okA := v[small]
		b, okB := v[large]
		if !okA || !okB || a <= 0 || b <= 0 {
			return 0, false
		}
		return K(a, b, nSmall, nLarge), true
	}
}

// K is k in value ∝ n^k from value a at size nSmall and b at nLarge.
func K(a, b, nSmall, nLarge float64) float64 { return math.Log(b/a) / math.Log(nLarge/nSmall) }

// Run is one `go test` invocation of make bench, made Rounds times (at least once); each figure it measures
// is then the median of the rounds (see Median).
type Run struct {
	Package, Bench, Benchtime, Timeout string
	Rounds                             int
}

// Median merges the measurements of several rounds (benchmark → metric → value, as Measurements reads
// them): each metric becomes the median of the rounds that reported it (with an even count, the mean of
// the middle two).
func Median(rounds []map[string]map[string]float64) map[string]map[string]float64 {
	all := map[string]map[string][]float64{}
	for _, r := range rounds {
		for name, metrics := range r {
			if all[name] == nil {
				all[name] = map[string][]float64{}
			}
			for unit, v := range metrics {
				all[name][unit] = append(all[name][unit], v)
			}
		}
	}
	out := map[string]map[string]float64{}
	for name, metrics := range all {
		out[name] = map[string]float64{}
		for unit, vs := range metrics {
			slices.Sort(vs)
			m := vs[len(vs)/2]
			if len(vs)%2 == 0 {
				m = (vs[len(vs)/2-1] + m) / 2
			}
			out[name][unit] = m
		}
	}
	return out
}

// Args are the go test arguments of the run.
func (r Run) Args() []string {
	return []string{"test", "-run", "^$", "-bench", r.Bench, "-benchtime", r.Benchtime, "-timeout", r.Timeout, "-count", "1", r.Package}
}

// Result is one figure's measured value, as results.json holds it.
type Result struct {
	Name      string  `json:"name"`
	Title     string  `json:"title"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	Goal      *Goal   `json:"goal,omitempty"`
	Met       *bool   `json:"met,omitempty"`
	Benchmark string  `json:"benchmark,omitempty"` // "package Benchmark… metric", or empty when derived
	// Commit is the commit the value was measured at: a run narrowed by BENCH_PKGS keeps the other
	// figures' values and their commits.
	Commit string `json:"commit,omitempty"`
}

// Machine is where the figures were measured.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memoryGiB"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
	Commit    string `json:"commit,omitempty"`
}

// Results is the content of bench/results.json.
type Results struct {
	Machine Machine  `json:"machine"`
	Figures []Result `json:"figures"`
}

// gomaxprocs is the "-N" suffix go test appends to a benchmark's name.
var gomaxprocs = regexp.MustCompile(`-\d+$`)

// Measurements reads go test -bench output of one package: benchmark name (no "Benchmark" prefix, no
// GOMAXPROCS suffix) → metric → value. A benchmark reported twice keeps its last values.
func Measurements(out io.Reader) (map[string]map[string]float64, error) {
	// Test logs interleave with results and may hold lines longer than benchfmt's reader takes: hand it
	// only the result lines.
	var results bytes.Buffer
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if line := sc.Bytes(); bytes.HasPrefix(line, []byte("Benchmark")) {
			results.Write(line)
			results.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	got := map[string]map[string]float64{}
	r := benchfmt.NewReader(&results, "go test")
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue // a syntax error or unit metadata: go test output mixes in test logs
		}
		name := gomaxprocs.ReplaceAllString(res.Name.String(), "")
		m := map[string]float64{}
		for _, v := range res.Values {
			unit, value := v.Unit, v.Value
			if v.OrigUnit != "" {
				unit, value = v.OrigUnit, v.OrigValue
			}
			m[unit] = value
		}
		got[name] = m
	}
	return got, r.Err()
}

// Evaluate fills the figures from measurements keyed by package. A figure whose benchmark did not run is
// taken from previous (the last results.json), so running part of make bench keeps the rest; one with
// neither is missing and named in the error.
func Evaluate(figures []Figure, measured map[string]map[string]map[string]float64, previous []Result, commit string) ([]Result, error) {
	prev := map[string]Result{}
	for _, r := range previous {
		prev[r.Name] = r
	}
	values := map[string]float64{}
	var out []Result
	var missing []string
	for _, f := range figures {
		r := Result{Name: f.Name, Title: f.Title, Unit: f.Unit, Goal: f.Goal, Commit: commit}
		var ok bool
		if f.Derived != nil {
			r.Value, ok = f.Derived(values)
			// Derived from kept values, it keeps its commit.
			if p, seen := prev[f.Name]; ok && seen && p.Value == r.Value {
				r.Commit = p.Commit
			}
		} else {
			r.Benchmark = fmt.Sprintf("%s Benchmark%s %s", f.Package, f.Benchmark, f.Metric)
			r.Value, ok = measured[f.Package][f.Benchmark][f.Metric]
			if !ok {
				var p Result
				if p, ok = prev[f.Name]; ok {
					r.Value, r.Commit = p.Value, p.Commit
				}
			}
		}
		if !ok {
			missing = append(missing, f.Name)
			continue
		}
		values[f.Name] = r.Value
		if f.Goal != nil {
			met := f.Goal.Met(r.Value)
			r.Met = &met
		}
		out = append(out, r)
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("no value for %s: run their benchmarks (make bench)", strings.Join(missing, ", "))
	}
	return out, nil
}

// Table renders the results as the Markdown table the README shows.
func Table(res Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured on %s, %d cores, %d GiB, Linux %s, %s, each figure at the commit beside it", res.Machine.CPU, res.Machine.Cores, res.Machine.MemoryGiB, res.Machine.Kernel, res.Machine.GoVersion)
	b.WriteString(" (`bench/results.json`).\n\n| figure | measured | goal | | commit |\n|---|---|---|---|---|\n")
	for _, r := range res.Figures {
		goal, mark := "—", ""
		if r.Goal != nil {
			goal = strings.TrimSpace(r.Goal.String() + " " + r.Unit)
			mark = "met"
			if !*r.Met {
				mark = "**not met**"
			}
		}
		value := formatValue(r.Value)
		if r.Unit == "" {
			value = fmt.Sprintf("%.3f", r.Value) // an exponent: 1.004 is not 1
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Title, strings.TrimSpace(value+" "+r.Unit), goal, mark, r.Commit)
	}
	return b.String()
}

// formatValue prints up to three significant decimals, without trailing zeros.
func formatValue(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	}
}

// JSON is results.json's content: indented, newline-terminated.
func JSON(res Results) ([]byte, error) {
	data, err := json.MarshalIndent(res, "", "  ")
	return append(data, '\n'), err
}

// Markers delimit the generated table in the README.
const (
	BeginMarker = "<!-- bench:begin (make bench writes this table) -->"
	EndMarker   = "<!-- bench:end -->"
)

// Splice replaces the text between the markers in doc by table.
func Splice(doc []byte, table string) ([]byte, error) {
	return docsection.Splice(doc, BeginMarker, EndMarker, table)
}
