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
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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
	Derived *Derivation
	// Setup, when set, is this figure's instead of its Run's (a run whose sub-benchmarks measure in
	// different modes).
	Setup *Setup
}

// Derivation computes a figure from others: Value gets their values in the order of From.
type Derivation struct {
	From  []string
	Value func(from []float64) (float64, bool)
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
func Exponent(small, large string, nSmall, nLarge float64) *Derivation {
	return &Derivation{From: []string{small, large}, Value: func(v []float64) (float64, bool) {
		if v[0] <= 0 || v[1] <= 0 {
			return 0, false
		}
		return K(v[0], v[1], nSmall, nLarge), true
	}}
}

// K is k in value ∝ n^k from value a at size nSmall and b at nLarge.
func K(a, b, nSmall, nLarge float64) float64 { return math.Log(b/a) / math.Log(nLarge/nSmall) }

// Run is one `go test` invocation of make bench, made Rounds times (at least once); each figure it measures
// is then the median of the rounds (see Median).
type Run struct {
	Package, Bench, Benchtime, Timeout string
	Rounds                             int
	// Setup is what the run measures on. It is stated here, once per go test invocation, because every
	// figure of a run shares it (a figure's own Setup is for a run that measures in several modes); what
	// the harness sees itself (the command, the environment, the machine) and the processes a benchmark
	// starts with their flags (ReportProcess, where the benchmark sets them) are not repeated in it.
	Setup Setup
}

// Setup is the part of a figure's configuration only its benchmark's code knows: where the code under
// test runs and what stands in for the parts of a cluster.
type Setup struct {
	// Mode is where the code under test runs: "envtest" (the test control plane: kube-apiserver and
	// etcd, no kubelet, scheduler or controller-manager), "in-process" (no cluster: a synthetic
	// snapshot), "real node VMs" or "simulated" (the sandboxes make run starts).
	Mode string
	// Simulated says what stands in for what a cluster has (fake agents, lvmsim, loop devices) and what
	// is not there (no kubelet).
	Simulated string
}

// Selects reports whether the run measures figure f: same package, and its -bench pattern selects the
// figure's top-level benchmark.
func (r Run) Selects(f Figure) bool {
	if f.Derived != nil || r.Package != f.Package {
		return false
	}
	base, _, _ := strings.Cut(f.Benchmark, "/")
	ok, err := regexp.MatchString(r.Bench, "Benchmark"+base)
	return err == nil && ok
}

// Command is the go test command line of the run.
func (r Run) Command() string { return "go " + strings.Join(r.Args(), " ") }

// Median merges the measurements of several rounds (benchmark → metric → value, as Parse reads them): each
// metric becomes the median of the rounds (with an even count, the mean of the middle two). A metric some
// round did not report is left out: a figure is the median of every round or not measured (it then keeps
// its previous value).
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
		for unit, vs := range metrics {
			if len(vs) < len(rounds) {
				continue // partial: not every round reported it
			}
			if out[name] == nil {
				out[name] = map[string]float64{}
			}
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

// Result is one figure's measured value, as results.json holds it, with where it comes from: a figure is
// written once, by the run that measured it, and kept as it is (title and goal included) by every later
// run that did not measure it.
type Result struct {
	Name      string  `json:"name"`
	Title     string  `json:"title"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	Goal      *Goal   `json:"goal,omitempty"`
	Met       *bool   `json:"met,omitempty"`
	Benchmark string  `json:"benchmark,omitempty"` // "package Benchmark… metric", or empty when derived
	// Commit is the commit checked out when make bench started the run that measured the value, and
	// Uncommitted the files that differed from it then (their changes were measured too).
	Commit      string   `json:"commit"`
	Uncommitted []string `json:"uncommitted,omitempty"`
	// Date is when that run ended, RFC 3339 in UTC; empty for figures measured before make bench
	// recorded dates.
	Date          string         `json:"date,omitempty"`
	Configuration *Configuration `json:"configuration,omitempty"`
}

// Configuration is how a figure was measured.
type Configuration struct {
	Mode      string `json:"mode"`
	Simulated string `json:"simulated,omitempty"`
	// Processes are those the benchmark started for the measurement, with their environment and flags,
	// as it reported them (ReportProcess); empty when it reports none.
	Processes []string `json:"processes,omitempty"`
	Command   string   `json:"command,omitempty"` // the go test command line
	// Rounds is how many times it ran, each a fresh process (and control plane); the figure is their median.
	Rounds int `json:"rounds,omitempty"`
	// Environment is the Go runtime's variables go test ran with (the benchmark, and every process it
	// starts, inherits them), or "not recorded".
	Environment string   `json:"environment"`
	Machine     *Machine `json:"machine,omitempty"` // nil: not recorded
}

// Machine is where a figure was measured.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memoryGiB"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
}

func (m Machine) String() string {
	return fmt.Sprintf("%s, %d cores, %d GiB, Linux %s, %s", m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.GoVersion)
}

// Results is the content of bench/results.json.
type Results struct {
	Figures []Result `json:"figures"`
}

// Provenance is what every figure one make bench measures shares.
type Provenance struct {
	Commit      string
	Uncommitted []string
	Environment string
	Machine     Machine
}

// Measured is what one Run measured: the median of its rounds (benchmark → metric → value), the
// processes its benchmarks reported, and when its last round ended. Only a run whose every round passed
// is measured: a failed or timed-out go test leaves its figures as they were.
type Measured struct {
	Run       Run
	Values    map[string]map[string]float64
	Processes []string
	Ended     time.Time
}

// RuntimeVariables are the environment variables of the Go runtime and toolchain that change what a
// benchmark measures; Environment records those set.
var RuntimeVariables = []string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG", "GOFLAGS", "GOEXPERIMENT", "GOAMD64"}

// Environment describes the RuntimeVariables lookup finds set: "GOGC=400 GOMAXPROCS=2", or that none is.
func Environment(lookup func(string) (string, bool)) string {
	var set []string
	for _, k := range RuntimeVariables {
		if v, ok := lookup(k); ok {
			set = append(set, k+"="+v)
		}
	}
	if len(set) == 0 {
		return "none of " + strings.Join(RuntimeVariables, ", ") + " set"
	}
	return strings.Join(set, " ")
}

// NotRecorded is the Environment of figures measured before make bench recorded it.
const NotRecorded = "not recorded"

// gomaxprocs is the "-N" suffix go test appends to a benchmark's name.
var gomaxprocs = regexp.MustCompile(`-\d+$`)

// processLine is how ReportProcess's lines look in go test output: the log line's file and line, the
// marker, the benchmark's name and the process.
var processLine = regexp.MustCompile(`^\s+\S+:\d+: ` + regexp.QuoteMeta(processMarker) + `\S+: (.+)$`)

const processMarker = "bench: process of "

// ReportProcess records, for make bench, a process the benchmark started for its measurement: its
// environment and command line as the benchmark gives them (values that change from run to run, such as
// temporary paths and ports, left out or named). make bench puts it in the configuration of the figures
// the run measures: the benchmark that sets a process's flags states them, so they are written once.
func ReportProcess(tb testing.TB, process string) {
	tb.Helper()
	tb.Logf("%s%s: %s", processMarker, tb.Name(), strings.Join(strings.Fields(process), " "))
}

// Output is what one go test -bench run printed: benchmark name (no "Benchmark" prefix, no GOMAXPROCS
// suffix) → metric → value, and the processes its benchmarks reported (ReportProcess), each once, in
// order.
type Output struct {
	Values    map[string]map[string]float64
	Processes []string
}

// Parse reads go test -bench output of one package. A benchmark reported twice keeps its last values.
func Parse(out io.Reader) (Output, error) {
	// Test logs interleave with results and may hold lines longer than benchfmt's reader takes: hand it
	// only the result lines.
	var results bytes.Buffer
	got := Output{Values: map[string]map[string]float64{}}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("Benchmark")) {
			results.Write(line)
			results.WriteByte('\n')
		} else if m := processLine.FindSubmatch(line); m != nil && !slices.Contains(got.Processes, string(m[1])) {
			got.Processes = append(got.Processes, string(m[1]))
		}
	}
	if err := sc.Err(); err != nil {
		return got, err
	}
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
		got.Values[name] = m
	}
	return got, r.Err()
}

// Evaluate fills the figures. A figure a run measured now gets that run's value, commit, date and
// configuration; any other is taken from previous (the last results.json) as it is, so a run that failed,
// timed out, did not report a metric or was not run (BENCH_PKGS) changes nothing of what was measured
// before. One with neither is missing and named in the error.
func Evaluate(figures []Figure, measured []Measured, previous []Result, p Provenance) ([]Result, error) {
	prev := map[string]Result{}
	for _, r := range previous {
		prev[r.Name] = r
	}
	got := map[string]Result{}
	fresh := map[string]bool{}
	var out []Result
	var missing []string
	for _, f := range figures {
		var r Result
		var ok bool
		if f.Derived != nil {
			r, fresh[f.Name], ok = derive(f, got, fresh, prev)
		} else if r, ok = measure(f, measured, p); ok {
			fresh[f.Name] = true
		} else {
			r, ok = prev[f.Name]
		}
		if !ok {
			missing = append(missing, f.Name)
			continue
		}
		got[f.Name] = r
		out = append(out, r)
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("no value for %s: run their benchmarks (make bench)", strings.Join(missing, ", "))
	}
	return out, nil
}

// measure is f as a run measured it now, if one did.
func measure(f Figure, measured []Measured, p Provenance) (Result, bool) {
	for _, m := range measured {
		v, ok := m.Values[f.Benchmark][f.Metric]
		if !m.Run.Selects(f) || !ok {
			continue
		}
		r := result(f, v)
		r.Benchmark = fmt.Sprintf("%s Benchmark%s %s", f.Package, f.Benchmark, f.Metric)
		r.Commit, r.Uncommitted, r.Date = p.Commit, p.Uncommitted, m.Ended.UTC().Format(time.RFC3339)
		setup := m.Run.Setup
		if f.Setup != nil {
			setup = *f.Setup
		}
		machine := p.Machine
		r.Configuration = &Configuration{Mode: setup.Mode, Simulated: setup.Simulated, Processes: m.Processes,
			Command: m.Run.Command(), Environment: p.Environment, Machine: &machine}
		if m.Run.Rounds > 1 {
			r.Configuration.Rounds = m.Run.Rounds
		}
		return r, true
	}
	return Result{}, false
}

// derive computes a derived figure from the figures it comes from, which it takes its commit, date and
// configuration from, and says whether it is measured now (they all are). When they are not all measured
// now, or it cannot be computed from them, the previous result stands; without one it is computed from
// kept figures only if they share their provenance (one run measured them all).
func derive(f Figure, got map[string]Result, fresh map[string]bool, prev map[string]Result) (res Result, now, ok bool) {
	p, hasPrev := prev[f.Name]
	var from []Result
	var values []float64
	for _, name := range f.Derived.From {
		r, ok := got[name]
		if !ok {
			return p, false, hasPrev
		}
		from, values = append(from, r), append(values, r.Value)
	}
	if now = allFresh(f.Derived.From, fresh); !now {
		if hasPrev {
			return p, false, true
		}
		for _, r := range from[1:] {
			if r.Commit != from[0].Commit || r.Date != from[0].Date || !reflect.DeepEqual(r.Configuration, from[0].Configuration) {
				return Result{}, false, false
			}
		}
	}
	v, computed := f.Derived.Value(values)
	if !computed {
		return p, false, hasPrev
	}
	r := result(f, v)
	r.Commit, r.Uncommitted, r.Date, r.Configuration = from[0].Commit, from[0].Uncommitted, from[0].Date, from[0].Configuration
	for _, x := range from[1:] {
		r.Date = max(r.Date, x.Date) // RFC 3339 in UTC sorts as time does
		if !reflect.DeepEqual(x.Configuration, r.Configuration) {
			r.Configuration = &Configuration{Mode: "derived", Simulated: "from " + strings.Join(f.Derived.From, " and ") +
				", measured in different configurations", Environment: "see those figures"}
		}
	}
	return r, now, true
}

func allFresh(names []string, fresh map[string]bool) bool {
	for _, n := range names {
		if !fresh[n] {
			return false
		}
	}
	return true
}

// result is f with value v, its goal judged.
func result(f Figure, v float64) Result {
	r := Result{Name: f.Name, Title: f.Title, Value: v, Unit: f.Unit, Goal: f.Goal}
	if f.Goal != nil {
		met := f.Goal.Met(v)
		r.Met = &met
	}
	return r
}

// Table renders the results as the Markdown section the README shows: the table, each figure with the
// commit and day it was measured at and the number of its configuration, and the configurations.
func Table(res Results) string {
	var configs []*Configuration
	number := func(c *Configuration) int {
		for i, x := range configs {
			if reflect.DeepEqual(x, c) {
				return i + 1
			}
		}
		configs = append(configs, c)
		return len(configs)
	}
	var b strings.Builder
	b.WriteString("Each figure is given with the commit and the day (UTC) of the run that measured it and the number of " +
		"its configuration, listed below the table (`bench/results.json` has them in full).\n\n" +
		"| figure | measured | goal | | measured at |\n|---|---|---|---|---|\n")
	for _, r := range res.Figures {
		goal, mark := "—", ""
		if r.Goal != nil {
			goal = strings.TrimSpace(r.Goal.String() + " " + r.Unit)
			mark = "met"
			if r.Met != nil && !*r.Met {
				mark = "**not met**"
			}
		}
		value := formatValue(r.Value)
		if r.Unit == "" {
			value = fmt.Sprintf("%.3f", r.Value) // an exponent: 1.004 is not 1
		}
		at := r.Commit
		if n := len(r.Uncommitted); n > 0 {
			at += fmt.Sprintf(" + %d uncommitted %s", n, plural(n, "file", "files"))
		}
		if day, _, _ := strings.Cut(r.Date, "T"); day != "" {
			at += ", " + day
		} else {
			at += ", date not recorded"
		}
		if r.Configuration != nil {
			at += fmt.Sprintf(", configuration %d", number(r.Configuration))
		} else {
			at += ", configuration not recorded"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Title, strings.TrimSpace(value+" "+r.Unit), goal, mark, at)
	}
	if len(configs) > 0 {
		b.WriteString("\nConfigurations:\n\n")
	}
	for i, c := range configs {
		fmt.Fprintf(&b, "%d. %s", i+1, c.Mode)
		if c.Simulated != "" {
			b.WriteString(": " + strings.TrimSuffix(c.Simulated, "."))
		}
		b.WriteString(".")
		if len(c.Processes) > 0 {
			b.WriteString(" Started: `" + strings.Join(c.Processes, "`; `") + "`.")
		}
		if c.Command != "" {
			b.WriteString(" `" + c.Command + "`")
			if c.Rounds > 1 {
				fmt.Fprintf(&b, ", %d times, each in a fresh process: each figure is the median", c.Rounds)
			}
			b.WriteString(".")
		}
		fmt.Fprintf(&b, " Environment: %s.", c.Environment)
		if c.Machine != nil {
			fmt.Fprintf(&b, " Machine: %s.", c.Machine)
		} else {
			b.WriteString(" Machine not recorded.")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
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
