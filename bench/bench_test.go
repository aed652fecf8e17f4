package bench

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goTestOutput is go test -bench output as make bench reads it: test logs interleaved, sub-benchmarks,
// custom metrics, GOMAXPROCS suffixes.
var goTestOutput = `goos: linux
goarch: amd64
pkg: github.com/lvms-dev/lvms/operator/nodeset
cpu: Intel(R) Xeon(R) Processor
BenchmarkNodeSet/nodes=500-2         	       1	17012345678 ns/op	        21.5 heap-MiB	        72.25 RSS-MiB	        12.5 s-to-ready	         0 writes/idle-min
    nodeset_bench_test.go:99: operator writes during an idle minute:
BenchmarkNodeSet/nodes=5000-2        	       1	90012345678 ns/op	       150 heap-MiB	       190 RSS-MiB	       200 s-to-ready
PASS
ok  	github.com/lvms-dev/lvms/operator/nodeset	130.1s
` + "    a log line longer than a scanner's default buffer: " + strings.Repeat("x", 200<<10) + "\n"

func TestMeasurements(t *testing.T) {
	got, err := Measurements(strings.NewReader(goTestOutput))
	if err != nil {
		t.Fatal(err)
	}
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
}

func TestEvaluate(t *testing.T) {
	figures := []Figure{
		{Name: "small", Package: "./p", Benchmark: "NodeSet/nodes=500", Metric: "s-to-ready", Unit: "s", Goal: Below(10)},
		{Name: "large", Package: "./p", Benchmark: "NodeSet/nodes=5000", Metric: "s-to-ready", Unit: "s", Goal: Below(60)},
		{Name: "k", Unit: "k", Goal: AtMost(1), Derived: Exponent("small", "large", 500, 5000)},
		{Name: "kept", Package: "./q", Benchmark: "Other", Metric: "ms", Unit: "ms"},
	}
	measured, err := Measurements(strings.NewReader(goTestOutput))
	if err != nil {
		t.Fatal(err)
	}
	byPkg := map[string]map[string]map[string]float64{"./p": measured}
	got, err := Evaluate(figures, byPkg, []Result{{Name: "kept", Value: 7, Commit: "old1234"}, {Name: "small", Value: 99, Commit: "old1234"}}, "new5678")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("results %+v", got)
	}
	if got[0].Value != 12.5 || *got[0].Met || got[1].Value != 200 || *got[1].Met {
		t.Errorf("measured values win over the previous ones, goals judged: %+v %+v", got[0], got[1])
	}
	if want := math.Log(200/12.5) / math.Log(10); math.Abs(got[2].Value-want) > 1e-9 || *got[2].Met {
		t.Errorf("exponent = %v, want %v, not met (> 1)", got[2].Value, want)
	}
	if got[3].Value != 7 || got[3].Met != nil || got[3].Benchmark != "./q BenchmarkOther ms" || got[3].Commit != "old1234" {
		t.Errorf("a figure not run keeps its previous value and commit, without a goal: %+v", got[3])
	}
	if got[0].Commit != "new5678" || got[2].Commit != "new5678" {
		t.Errorf("figures measured now (and derived from them) carry this run's commit: %+v %+v", got[0], got[2])
	}

	_, err = Evaluate(figures, byPkg, nil, "")
	if err == nil || !strings.HasSuffix(err.Error(), "no value for kept: run their benchmarks (make bench)") {
		t.Errorf("one figure neither measured nor kept: err = %v", err)
	}
	_, err = Evaluate(figures, map[string]map[string]map[string]float64{}, nil, "")
	if err == nil || !strings.Contains(err.Error(), "small, large, k, kept") {
		t.Errorf("nothing measured: err = %v, want every figure named", err)
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
	res := Results{Machine: Machine{CPU: "Test CPU", Cores: 2, MemoryGiB: 24, Kernel: "6.1.0", GoVersion: "go1.26.0", Commit: "abc1234"},
		Figures: []Result{
			{Name: "a", Title: "agent RSS", Value: 47.66, Unit: "MiB", Goal: Below(25), Met: &missed, Commit: "abc1234"},
			{Name: "b", Title: "writes", Value: 0, Unit: "writes", Goal: AtMost(0), Met: &met, Commit: "abc1234"},
			{Name: "c", Title: "latency", Value: 125, Unit: "ms", Commit: "def5678"},
		}}
	table := Table(res)
	for _, want := range []string{
		"Measured on Test CPU, 2 cores, 24 GiB, Linux 6.1.0, go1.26.0, each figure at the commit beside it",
		"| agent RSS | 47.7 MiB | < 25 MiB | **not met** | abc1234 |",
		"| writes | 0 writes | ≤ 0 writes | met | abc1234 |",
		"| latency | 125 ms | — |  | def5678 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
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
		selected := false
		for _, r := range Runs {
			if r.Package == f.Package && regexp.MustCompile(r.Bench).MatchString("Benchmark"+base) {
				selected = true
			}
		}
		if !selected {
			t.Errorf("%s: no run of make bench selects Benchmark%s in %s", f.Name, base, f.Package)
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
	// A round that failed before reporting a metric leaves it to the others.
	partial := Median([]map[string]map[string]float64{round(4, 50), {"NodeSet/nodes=500": {"s-to-ready": 9}}, round(5, 52)})["NodeSet/nodes=500"]
	if partial["RSS-MiB"] != 51 || partial["s-to-ready"] != 5 {
		t.Errorf("median with a partial round = %v, want RSS 51 (two rounds) and 5 s (three)", partial)
	}
}
