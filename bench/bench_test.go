package bench

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// goTestOutput is go test -bench output as make bench reads it: test logs interleaved, sub-benchmarks,
// custom metrics, GOMAXPROCS suffixes, processes reported by both sizes.
var goTestOutput = `goos: linux
goarch: amd64
pkg: github.com/lvms-dev/lvms/operator/nodeset
cpu: Intel(R) Xeon(R) Processor
BenchmarkNodeSet/nodes=500-2         	       1	17012345678 ns/op	        21.5 heap-MiB	        72.25 RSS-MiB	        12.5 s-to-ready	         0 writes/idle-min
--- BENCH: BenchmarkNodeSet/nodes=500-2
    nodeset_bench_test.go:99: operator writes during an idle minute:
    nodeset_bench_test.go:310: bench: process of BenchmarkNodeSet/nodes=500: GOGC=50 lvms operator --namespace=NAMESPACE
BenchmarkNodeSet/nodes=5000-2        	       1	90012345678 ns/op	       150 heap-MiB	       190 RSS-MiB	       200 s-to-ready
--- BENCH: BenchmarkNodeSet/nodes=5000-2
    nodeset_bench_test.go:310: bench: process of BenchmarkNodeSet/nodes=5000: GOGC=50 lvms operator --namespace=NAMESPACE
    nodeset_bench_test.go:311: the process of BenchmarkNodeSet/nodes=5000: not a report
PASS
ok  	github.com/lvms-dev/lvms/operator/nodeset	130.1s
` + "    a log line longer than a scanner's default buffer: " + strings.Repeat("x", 200<<10) + "\n"

func TestParse(t *testing.T) {
	out, err := Parse(strings.NewReader(goTestOutput))
	if err != nil {
		t.Fatal(err)
	}
	got := out.Values
	small, large := got["NodeSet/nodes=500"], got["NodeSet/nodes=5000"]
	if small["RSS-MiB"] != 72.25 || small["s-to-ready"] != 12.5 || small["writes/idle-min"] != 0 || large["s-to-ready"] != 200 {
		t.Fatalf("measurements = %v", got)
	}
	if _, ok := small["writes/idle-min"]; !ok {
		t.Error("a metric reported as 0 is missing; it must read as a measured 0")
	}
	if len(got) != 2 {
		t.Errorf("%d benchmarks read, want 2: %v", len(got), got)
	}
	if want := []string{"GOGC=50 lvms operator --namespace=NAMESPACE"}; !reflect.DeepEqual(out.Processes, want) {
		t.Errorf("processes = %q, want %q (reported by both sizes, listed once)", out.Processes, want)
	}
}

// TestReportProcess: what a benchmark reports is what Parse reads back from go test's output, on one line.
func TestReportProcess(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", "^BenchmarkReportProcessChild$", "-test.benchtime", "1x")
	cmd.Env = append(os.Environ(), "BENCH_REPORT_PROCESS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	got, err := Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"GOGC=50 lvms operator --flag=a b"}; !reflect.DeepEqual(got.Processes, want) {
		t.Errorf("processes = %q, want %q; output:\n%s", got.Processes, want, out)
	}
	if _, ok := got.Values["ReportProcessChild/size=1"]["things"]; !ok {
		t.Errorf("the benchmark's metric is not read: %v", got.Values)
	}
}

func BenchmarkReportProcessChild(b *testing.B) {
	if os.Getenv("BENCH_REPORT_PROCESS_CHILD") != "1" {
		b.Skip("run by TestReportProcess")
	}
	b.Run("size=1", func(b *testing.B) {
		ReportProcess(b, "GOGC=50 lvms operator\n  --flag=a b")
		b.ReportMetric(1, "things")
	})
}

var (
	ended   = time.Date(2026, 12, 6, 11, 30, 5, 0, time.FixedZone("CET", 3600))
	machine = Machine{CPU: "Test CPU", Cores: 2, MemoryGiB: 24, Kernel: "6.1.0", GoVersion: "go1.26.0"}
	now     = Provenance{Commit: "new5678", Uncommitted: []string{"operator/x.go"}, Environment: "GOGC=400", Machine: machine}
)

// kept is a figure measured by an earlier make bench, as results.json holds it.
func kept(name string, value float64) Result {
	return Result{Name: name, Title: "old title of " + name, Value: value, Unit: "s", Benchmark: "./old Benchmark" + name + " s",
		Commit: "old1234", Date: "2026-11-01T09:00:00Z",
		Configuration: &Configuration{Mode: "envtest", Simulated: "the old way", Command: "go test old", Environment: "none set", Machine: &machine}}
}

func TestEvaluate(t *testing.T) {
	figures := []Figure{
		{Name: "small", Package: "./p", Benchmark: "NodeSet/nodes=500", Metric: "s-to-ready", Unit: "s", Goal: Below(10)},
		{Name: "large", Package: "./p", Benchmark: "NodeSet/nodes=5000", Metric: "s-to-ready", Unit: "s", Goal: Below(60)},
		{Name: "k", Goal: AtMost(1), Derived: Exponent("small", "large", 500, 5000)},
		{Name: "kept", Package: "./q", Benchmark: "Other", Metric: "ms", Unit: "ms"},
		{Name: "unreported", Package: "./p", Benchmark: "NodeSet/nodes=500", Metric: "idle-RSS-MiB", Unit: "MiB"},
		{Name: "own-setup", Package: "./p", Benchmark: "NodeSet/nodes=5000", Metric: "RSS-MiB", Unit: "MiB", Setup: &Setup{Mode: "simulated"}},
	}
	out, err := Parse(strings.NewReader(goTestOutput))
	if err != nil {
		t.Fatal(err)
	}
	run := Run{Package: "./p", Bench: "^BenchmarkNodeSet$", Benchtime: "1x", Timeout: "40m", Rounds: 3,
		Setup: Setup{Mode: "envtest", Simulated: "fake agents"}}
	measured := []Measured{{Run: run, Values: out.Values, Processes: out.Processes, Ended: ended}}
	previous := []Result{kept("kept", 7), kept("small", 99), kept("unreported", 30)}
	got, err := Evaluate(figures, measured, previous, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("results %+v", got)
	}
	if got[0].Value != 12.5 || *got[0].Met || got[1].Value != 200 || *got[1].Met {
		t.Errorf("measured values win over the previous ones, goals judged: %+v %+v", got[0], got[1])
	}
	want := &Configuration{Mode: "envtest", Simulated: "fake agents", Processes: []string{"GOGC=50 lvms operator --namespace=NAMESPACE"},
		Command: "go test -run ^$ -bench ^BenchmarkNodeSet$ -benchtime 1x -timeout 40m -count 1 ./p", Rounds: 3,
		Environment: "GOGC=400", Machine: &machine}
	for _, r := range got[:2] {
		if r.Commit != "new5678" || !reflect.DeepEqual(r.Uncommitted, now.Uncommitted) || r.Date != "2026-12-06T10:30:05Z" {
			t.Errorf("%s: measured now, it carries this run's commit, changes and end in UTC: %+v", r.Name, r)
		}
		if !reflect.DeepEqual(r.Configuration, want) {
			t.Errorf("%s: configuration\n%+v, want\n%+v", r.Name, r.Configuration, want)
		}
	}
	if want := math.Log(200/12.5) / math.Log(10); math.Abs(got[2].Value-want) > 1e-9 || *got[2].Met {
		t.Errorf("exponent = %v, want %v, not met (> 1)", got[2].Value, want)
	}
	if got[2].Commit != "new5678" || got[2].Date != got[0].Date || !reflect.DeepEqual(got[2].Configuration, want) {
		t.Errorf("a figure derived from figures measured now carries their commit, date and configuration: %+v", got[2])
	}
	for i, name := range map[int]string{3: "kept", 4: "unreported"} {
		prev := kept(name, map[string]float64{"kept": 7, "unreported": 30}[name])
		if !reflect.DeepEqual(got[i], prev) {
			t.Errorf("%s, not measured now, must stay as results.json had it:\n%+v\nwant\n%+v", name, got[i], prev)
		}
	}
	if c := got[5].Configuration; c.Mode != "simulated" || c.Simulated != "" || c.Command != want.Command {
		t.Errorf("a figure's own setup replaces its run's, the rest is the run's: %+v", c)
	}

	_, err = Evaluate(figures, measured, nil, now)
	if err == nil || !strings.HasSuffix(err.Error(), "no value for kept, unreported: run their benchmarks (make bench)") {
		t.Errorf("figures neither measured nor kept: err = %v", err)
	}
	_, err = Evaluate(figures, nil, nil, now)
	if err == nil || !strings.Contains(err.Error(), "small, large, k, kept, unreported, own-setup") {
		t.Errorf("nothing measured: err = %v, want every figure named", err)
	}
}

// TestEvaluate_NothingMeasured_EveryFigureAsItWas: a make bench whose runs all failed (or BENCH_PKGS=none)
// writes results.json byte for byte as it was, derived figures included.
func TestEvaluate_NothingMeasured_EveryFigureAsItWas(t *testing.T) {
	figures := []Figure{
		{Name: "small", Package: "./p", Benchmark: "NodeSet/nodes=500", Metric: "s-to-ready", Unit: "s"},
		{Name: "large", Package: "./p", Benchmark: "NodeSet/nodes=5000", Metric: "s-to-ready", Unit: "s"},
		{Name: "k", Goal: AtMost(1), Derived: Exponent("small", "large", 500, 5000)},
	}
	k := kept("k", 0.9)
	k.Title, k.Unit, k.Benchmark = "old title of the exponent", "", ""
	previous := Results{Figures: []Result{kept("small", 4), kept("large", 40), k}}
	before, err := JSON(previous)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Evaluate(figures, nil, previous.Figures, now)
	if err != nil {
		t.Fatal(err)
	}
	after, err := JSON(Results{Figures: got})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("results.json changed although nothing was measured:\n%s\nwas\n%s", after, before)
	}

	// Measured now but not computable from them (a size measured as 0), the previous exponent stands.
	zero := []Measured{{Run: Run{Package: "./p", Bench: "^BenchmarkNodeSet$"}, Ended: ended,
		Values: map[string]map[string]float64{"NodeSet/nodes=500": {"s-to-ready": 4}, "NodeSet/nodes=5000": {"s-to-ready": 0}}}}
	got, err = Evaluate(figures, zero, previous.Figures, now)
	if err != nil || got[0].Commit != "new5678" || !reflect.DeepEqual(got[2], k) {
		t.Errorf("exponent not computable from the figures measured now: %+v, %v; want it as it was", got, err)
	}

	// Without a previous exponent, one is derived from the kept figures when one run measured them.
	got, err = Evaluate(figures, nil, previous.Figures[:2], now)
	if err != nil || got[2].Commit != "old1234" || got[2].Date != "2026-11-01T09:00:00Z" || got[2].Value != 1 {
		t.Errorf("exponent from kept figures of one run: %+v, %v", got, err)
	}
	// From figures of different runs it is not made up.
	other := kept("large", 40)
	other.Commit = "older99"
	_, err = Evaluate(figures, nil, []Result{kept("small", 4), other}, now)
	if err == nil || !strings.Contains(err.Error(), "no value for k") {
		t.Errorf("exponent from figures of different runs: err = %v, want it missing", err)
	}
}

func TestEnvironment(t *testing.T) {
	env := map[string]string{"GOGC": "400", "GOMAXPROCS": "2", "HOME": "/root"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if got := Environment(lookup); got != "GOGC=400 GOMAXPROCS=2" {
		t.Errorf("Environment = %q", got)
	}
	if got := Environment(func(string) (string, bool) { return "", false }); !strings.HasPrefix(got, "none of GOGC, GOMEMLIMIT, GOMAXPROCS") {
		t.Errorf("nothing set: %q", got)
	}
}

func TestGoal(t *testing.T) {
	if !Below(10).Met(9.9) || Below(10).Met(10) || !AtMost(0).Met(0) || AtMost(0).Met(0.5) {
		t.Error("Below is strict, AtMost inclusive")
	}
	if Below(25).String() != "< 25" || AtMost(1).String() != "≤ 1" {
		t.Errorf("%s, %s", Below(25), AtMost(1))
	}
}

func TestTableAndSplice(t *testing.T) {
	met, missed := true, false
	envtest := &Configuration{Mode: "envtest", Simulated: "fake agents.", Processes: []string{"GOGC=50 lvms operator"},
		Command: "go test -bench ^BenchmarkX$ ./p", Rounds: 3, Environment: "none set", Machine: &machine}
	res := Results{Figures: []Result{
		{Name: "a", Title: "agent RSS", Value: 47.66, Unit: "MiB", Goal: Below(25), Met: &missed, Commit: "abc1234",
			Date: "2026-12-06T10:30:05Z", Configuration: envtest},
		{Name: "b", Title: "writes", Value: 0, Unit: "writes", Goal: AtMost(0), Met: &met, Commit: "abc1234",
			Date: "2026-12-06T10:30:05Z", Configuration: &Configuration{Mode: "envtest", Simulated: "fake agents.", Processes: []string{"GOGC=50 lvms operator"},
				Command: "go test -bench ^BenchmarkX$ ./p", Rounds: 3, Environment: "none set", Machine: &Machine{CPU: "Test CPU", Cores: 2, MemoryGiB: 24, Kernel: "6.1.0", GoVersion: "go1.26.0"}}},
		{Name: "c", Title: "latency", Value: 125, Unit: "ms", Commit: "def5678", Uncommitted: []string{"x.go", "y.go"},
			Date: "2026-12-07T01:00:00Z", Configuration: &Configuration{Mode: "in-process", Command: "go test ./q", Environment: "GOGC=400"}},
		{Name: "d", Title: "old", Value: 1.5, Unit: "s", Commit: "0ld0000", Configuration: &Configuration{Mode: "envtest", Environment: NotRecorded}},
	}}
	table := Table(res)
	for _, want := range []string{
		"| figure | measured | goal | | measured at |",
		"| agent RSS | 47.7 MiB | < 25 MiB | **not met** | abc1234, 2026-12-06, configuration 1 |",
		"| writes | 0 writes | ≤ 0 writes | met | abc1234, 2026-12-06, configuration 1 |",
		"| latency | 125 ms | — |  | def5678 + 2 uncommitted files, 2026-12-07, configuration 2 |",
		"| old | 1.5 s | — |  | 0ld0000, date not recorded, configuration 3 |",
		"1. envtest: fake agents. Started: `GOGC=50 lvms operator`. `go test -bench ^BenchmarkX$ ./p`, 3 times, each in a fresh process: each figure is the median. " +
			"Environment: none set. Machine: Test CPU, 2 cores, 24 GiB, Linux 6.1.0, go1.26.0.\n",
		"2. in-process. `go test ./q`. Environment: GOGC=400. Machine not recorded.\n",
		"3. envtest. Environment: not recorded. Machine not recorded.\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "4. ") {
		t.Errorf("equal configurations are listed once:\n%s", table)
	}
	doc := []byte("# Title\n\n" + BeginMarker + "\nold table\n" + EndMarker + "\n\nafter\n")
	out, err := Splice(doc, table)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "old table") || !strings.Contains(string(out), BeginMarker+"\n"+table+EndMarker+"\n\nafter") {
		t.Errorf("splice:\n%s", out)
	}
	if again, _ := Splice(out, table); string(again) != string(out) {
		t.Error("splicing the same table twice changes the document")
	}
	if _, err := Splice([]byte("no markers"), table); err == nil || !strings.Contains(err.Error(), "markers") {
		t.Errorf("no markers: err = %v", err)
	}
}

// TestFiguresRunnable: every figure's benchmark exists in its package and one of make bench's runs
// selects it, so no figure silently keeps a stale value.
func TestFiguresRunnable(t *testing.T) {
	names := map[string]bool{}
	for _, f := range Figures {
		if names[f.Name] {
			t.Errorf("figure %s listed twice", f.Name)
		}
		names[f.Name] = true
		if f.Derived != nil {
			continue
		}
		base, _, _ := strings.Cut(f.Benchmark, "/")
		src, err := exec.Command("grep", "-rl", "--include=*_test.go", "^func Benchmark"+base+"(b \\*testing.B)", filepath.Join("..", f.Package)).Output()
		if err != nil || len(src) == 0 {
			t.Errorf("%s: no func Benchmark%s in %s", f.Name, base, f.Package)
		}
		var selected []Run
		for _, r := range Runs {
			if r.Selects(f) {
				selected = append(selected, r)
			}
		}
		if len(selected) != 1 {
			t.Errorf("%s: %d runs of make bench select Benchmark%s in %s, want one", f.Name, len(selected), base, f.Package)
		}
		for _, r := range selected {
			if setup := cmp.Or(f.Setup, &r.Setup); setup.Mode == "" || setup.Simulated == "" {
				t.Errorf("%s: its configuration says neither where it runs nor what is simulated: %+v", f.Name, setup)
			}
		}
	}
	for _, f := range Figures {
		if f.Derived == nil {
			continue
		}
		for _, from := range f.Derived.From {
			if i, j := slices.IndexFunc(Figures, func(x Figure) bool { return x.Name == from }), slices.Index(Figures, f); i < 0 || i > j {
				t.Errorf("%s is derived from %s, which is not listed before it", f.Name, from)
			}
		}
	}
}

// TestREADMEShowsResults: the README's table is the one rendered from bench/results.json, so the
// figures users read are the measured ones.
func TestREADMEShowsResults(t *testing.T) {
	data, err := os.ReadFile("results.json")
	if err != nil {
		t.Fatalf("bench/results.json: %v (make bench writes it)", err)
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Splice(readme, Table(res))
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(readme) {
		t.Error("README.md's performance table is not the one bench/results.json renders: run make bench (or go run ./bench/run with BENCH_PKGS=none)")
	}
	for _, r := range res.Figures {
		if !names(Figures)[r.Name] {
			t.Errorf("results.json has %s, which bench/figures.go no longer lists", r.Name)
		}
	}
}

// TestResultsCarryProvenance: every figure in bench/results.json says at which commit, when and how it
// was measured (figures measured before dates were recorded say it by having none).
func TestResultsCarryProvenance(t *testing.T) {
	data, err := os.ReadFile("results.json")
	if err != nil {
		t.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	commit := regexp.MustCompile(`^[0-9a-f]{7,40}$`)
	for _, r := range res.Figures {
		if !commit.MatchString(r.Commit) {
			t.Errorf("%s: commit %q", r.Name, r.Commit)
		}
		if d, err := time.Parse(time.RFC3339, r.Date); r.Date != "" && (err != nil || d.Location() != time.UTC) {
			t.Errorf("%s: date %q is not RFC 3339 in UTC (%v)", r.Name, r.Date, err)
		}
		if c := r.Configuration; c == nil || c.Mode == "" || c.Environment == "" {
			t.Errorf("%s: configuration %+v lacks its mode or environment", r.Name, c)
		}
	}
}

func names(fs []Figure) map[string]bool {
	m := map[string]bool{}
	for _, f := range fs {
		m[f.Name] = true
	}
	return m
}

func TestMedian(t *testing.T) {
	round := func(time, rss float64) map[string]map[string]float64 {
		return map[string]map[string]float64{"NodeSet/nodes=500": {"s-to-ready": time, "RSS-MiB": rss}}
	}
	odd := Median([]map[string]map[string]float64{round(4.6, 50), round(3.5, 61), round(3.8, 52)})["NodeSet/nodes=500"]
	if odd["s-to-ready"] != 3.8 || odd["RSS-MiB"] != 52 {
		t.Errorf("median of three rounds = %v, want 3.8 s and 52 MiB (each metric on its own)", odd)
	}
	even := Median([]map[string]map[string]float64{round(4, 50), round(3, 60)})["NodeSet/nodes=500"]
	if even["s-to-ready"] != 3.5 || even["RSS-MiB"] != 55 {
		t.Errorf("median of two rounds = %v, want the means 3.5 s and 55 MiB", even)
	}
	// A metric one round did not report is not measured: the figure keeps its previous value.
	partial := Median([]map[string]map[string]float64{round(4, 50), {"NodeSet/nodes=500": {"s-to-ready": 9}}, round(5, 52)})["NodeSet/nodes=500"]
	if _, ok := partial["RSS-MiB"]; ok || partial["s-to-ready"] != 5 {
		t.Errorf("median with a partial round = %v, want no RSS (two rounds of three) and 5 s (three)", partial)
	}
}
