package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/bench"
)

// The figures of a make bench of two runs: ./fast measures one figure, ./slow (three rounds) two.
var (
	testFigures = []bench.Figure{
		{Name: "fast-ms", Title: "fast thing", Package: "./fast", Benchmark: "Fast", Metric: "ms-median", Unit: "ms", Goal: bench.Below(10)},
		{Name: "slow-s", Title: "slow thing", Package: "./slow", Benchmark: "Slow/nodes=500", Metric: "s-to-ready", Unit: "s"},
		{Name: "slow-rss", Title: "… its RSS", Package: "./slow", Benchmark: "Slow/nodes=500", Metric: "RSS-MiB", Unit: "MiB"},
	}
	testRuns = []bench.Run{
		{Package: "./fast", Bench: "^BenchmarkFast$", Benchtime: "20x", Timeout: "10m", Setup: bench.Setup{Mode: "in-process", Simulated: "a snapshot"}},
		{Package: "./slow", Bench: "^BenchmarkSlow$", Benchtime: "1x", Timeout: "40m", Rounds: 3, Setup: bench.Setup{Mode: "envtest", Simulated: "fake agents"}},
	}
	// The clock of this make bench: 2026-12-06 10:00 UTC, a minute more each time it is read.
	start = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
)

// previousResults is results.json as an earlier make bench (at old1234, 2026-11-01) wrote it.
func previousResults(t *testing.T) []byte {
	t.Helper()
	prov := bench.Provenance{Commit: "old1234", Environment: "none set", Machine: bench.Machine{CPU: "Old CPU", Cores: 2, MemoryGiB: 24, Kernel: "6.1", GoVersion: "go1.26.0"}}
	measured := []bench.Measured{
		{Run: testRuns[0], Values: map[string]map[string]float64{"Fast": {"ms-median": 40}}, Ended: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)},
		{Run: testRuns[1], Values: map[string]map[string]float64{"Slow/nodes=500": {"s-to-ready": 4.05, "RSS-MiB": 53.91}},
			Processes: []string{"GOGC=50 lvms operator"}, Ended: time.Date(2026, 11, 1, 9, 40, 0, 0, time.UTC)},
	}
	figures, err := bench.Evaluate(testFigures, measured, nil, prov)
	if err != nil {
		t.Fatal(err)
	}
	data, err := bench.JSON(bench.Results{Figures: figures})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// goTestResult is one round of a fake go test: its output and its error.
type goTestResult struct {
	out string
	err error
}

// newBencher is make bench in a temporary repository holding the previous results.json and a README,
// with go test answering each run's rounds from rounds (package → one result per round).
func newBencher(t *testing.T, rounds map[string][]goTestResult) (*bencher, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, resultsFile), previousResults(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, readme), []byte("# LVMS\n\n"+bench.BeginMarker+"\nold\n"+bench.EndMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := start
	b := &bencher{dir: dir, figures: testFigures, runs: testRuns, log: io.Discard,
		provenance: bench.Provenance{Commit: "new5678", Environment: "GOGC=400", Machine: bench.Machine{CPU: "New CPU", Cores: 2, MemoryGiB: 24, Kernel: "6.18", GoVersion: "go1.26.8"}},
		now:        func() time.Time { clock = clock.Add(time.Minute); return clock },
		goTest: func(r bench.Run, out io.Writer) error {
			left := rounds[r.Package]
			if len(left) == 0 {
				t.Fatalf("%s run more often than its rounds", r.Package)
			}
			rounds[r.Package] = left[1:]
			_, _ = io.WriteString(out, left[0].out)
			return left[0].err
		}}
	return b, dir
}

func fast(ms float64) goTestResult {
	return goTestResult{out: fmt.Sprintf("BenchmarkFast-2 \t 20\t 1000 ns/op\t %g ms-median\nPASS\n", ms)}
}

func slow(s, rss float64) goTestResult {
	return goTestResult{out: fmt.Sprintf("BenchmarkSlow/nodes=500-2 \t 1\t 1000 ns/op\t %g s-to-ready\t %g RSS-MiB\n"+
		"--- BENCH: BenchmarkSlow/nodes=500-2\n    slow_test.go:9: bench: process of BenchmarkSlow/nodes=500: GOGC=50 lvms operator --new\nPASS\n", s, rss)}
}

// figuresOf reads results.json's figures as written, each its bytes.
func figuresOf(t *testing.T, data []byte) map[string]json.RawMessage {
	t.Helper()
	var res struct{ Figures []json.RawMessage }
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, raw := range res.Figures {
		var r bench.Result
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		out[r.Name] = raw
	}
	return out
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func result(t *testing.T, raw json.RawMessage) bench.Result {
	t.Helper()
	var r bench.Result
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRun_FailedRound_KeepsTheMeasuredFigures: when go test fails in the last of three rounds (a benchmark
// failed or timed out after printing some results), results.json keeps the run's figures byte for byte as
// they were, with their own commit and date; the run that passed replaces its figure with this run's commit
// and date; make bench says which run failed and exits non-zero; the README shows both.
func TestRun_FailedRound_KeepsTheMeasuredFigures(t *testing.T) {
	timedOut := slow(99, 999)
	timedOut.out += "panic: test timed out after 40m0s\nFAIL\tgithub.com/lvms-dev/lvms/slow\t2400.1s\n"
	timedOut.err = errors.New("go test: exit status 1")
	b, dir := newBencher(t, map[string][]goTestResult{"./fast": {fast(38.5)}, "./slow": {slow(3.9, 50), slow(4.1, 52), timedOut}})
	before := figuresOf(t, read(t, filepath.Join(dir, resultsFile)))

	err := b.run()
	if err == nil || !strings.Contains(err.Error(), "./slow ^BenchmarkSlow$ failed, its figures kept as they were: round 3 of 3: go test: exit status 1") {
		t.Errorf("make bench must fail naming the failed run: err = %v", err)
	}
	after := figuresOf(t, read(t, filepath.Join(dir, resultsFile)))
	for _, name := range []string{"slow-s", "slow-rss"} {
		if !bytes.Equal(after[name], before[name]) {
			t.Errorf("%s was measured by the failed run: it must be kept byte for byte:\n%s\nwas\n%s", name, after[name], before[name])
		}
	}
	got := result(t, after["fast-ms"])
	if got.Value != 38.5 || got.Commit != "new5678" || got.Date != "2026-12-06T10:01:00Z" || got.Configuration.Environment != "GOGC=400" ||
		got.Configuration.Machine.CPU != "New CPU" || got.Configuration.Mode != "in-process" {
		t.Errorf("fast-ms, measured now, carries this run's value, commit, date and configuration: %+v %+v", got, got.Configuration)
	}
	doc := string(read(t, filepath.Join(dir, readme)))
	for _, want := range []string{
		"| fast thing | 38.5 ms | < 10 ms | **not met** | new5678, 2026-12-06, configuration 1 |",
		"| slow thing | 4.05 s | — |  | old1234, 2026-11-01, configuration 2 |",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("README lacks %q:\n%s", want, doc)
		}
	}
}

// TestRun_EveryRoundPassed_FiguresReplacedWithThisRunsCommitAndDate: a run whose rounds all passed
// replaces its figures with the medians, this run's commit, the date its last round ended (by the
// clock) and its configuration, with the process its benchmark reported.
func TestRun_EveryRoundPassed_FiguresReplacedWithThisRunsCommitAndDate(t *testing.T) {
	b, dir := newBencher(t, map[string][]goTestResult{"./fast": {fast(9)}, "./slow": {slow(3.9, 50), slow(4.6, 52), slow(4.1, 61)}})
	if err := b.run(); err != nil {
		t.Fatal(err)
	}
	after := figuresOf(t, read(t, filepath.Join(dir, resultsFile)))
	s, rss := result(t, after["slow-s"]), result(t, after["slow-rss"])
	if s.Value != 4.1 || rss.Value != 52 {
		t.Errorf("medians of three rounds: %v s, %v MiB, want 4.1 and 52", s.Value, rss.Value)
	}
	for _, r := range []bench.Result{s, rss} {
		c := r.Configuration
		if r.Commit != "new5678" || r.Date != "2026-12-06T10:02:00Z" || c.Mode != "envtest" || c.Simulated != "fake agents" || c.Rounds != 3 ||
			len(c.Processes) != 1 || c.Processes[0] != "GOGC=50 lvms operator --new" ||
			c.Command != "go test -run ^$ -bench ^BenchmarkSlow$ -benchtime 1x -timeout 40m -count 1 ./slow" {
			t.Errorf("%s: %+v %+v", r.Name, r, c)
		}
	}
	doc := string(read(t, filepath.Join(dir, readme)))
	if !strings.Contains(doc, "| slow thing | 4.1 s | — |  | new5678, 2026-12-06, configuration 2 |") ||
		!strings.Contains(doc, "2. envtest: fake agents. Started: `GOGC=50 lvms operator --new`.") || strings.Contains(doc, "old1234") {
		t.Errorf("README:\n%s", doc)
	}
}

// TestRun_MetricNotReported_KeepsTheFigure: a run that passes without reporting a figure's metric (in one
// round, or at all) leaves that figure as it was and says so.
func TestRun_MetricNotReported_KeepsTheFigure(t *testing.T) {
	noRSS := goTestResult{out: "BenchmarkSlow/nodes=500-2 \t 1\t 1000 ns/op\t 4.2 s-to-ready\nPASS\n"}
	b, dir := newBencher(t, map[string][]goTestResult{"./fast": {fast(9)}, "./slow": {slow(3.9, 50), noRSS, slow(4.1, 61)}})
	before := figuresOf(t, read(t, filepath.Join(dir, resultsFile)))
	err := b.run()
	if err == nil || !strings.Contains(err.Error(), "./slow ^BenchmarkSlow$ passed without reporting slow-rss") {
		t.Errorf("err = %v, want slow-rss named", err)
	}
	after := figuresOf(t, read(t, filepath.Join(dir, resultsFile)))
	if !bytes.Equal(after["slow-rss"], before["slow-rss"]) {
		t.Errorf("slow-rss, reported by two rounds of three, must be kept:\n%s\nwas\n%s", after["slow-rss"], before["slow-rss"])
	}
	if s := result(t, after["slow-s"]); s.Value != 4.1 || s.Commit != "new5678" {
		t.Errorf("slow-s, reported by every round, is measured: %+v", s)
	}
}

// TestRun_NothingRun_ResultsUnchanged: BENCH_PKGS=none renders the README from results.json and leaves
// results.json byte for byte as it was.
func TestRun_NothingRun_ResultsUnchanged(t *testing.T) {
	b, dir := newBencher(t, nil)
	b.only = []string{"none"}
	before := read(t, filepath.Join(dir, resultsFile))
	if err := b.run(); err != nil {
		t.Fatal(err)
	}
	if after := read(t, filepath.Join(dir, resultsFile)); !bytes.Equal(after, before) {
		t.Errorf("results.json changed:\n%s\nwas\n%s", after, before)
	}
	if doc := string(read(t, filepath.Join(dir, readme))); !strings.Contains(doc, "| fast thing | 40 ms | < 10 ms | **not met** | old1234, 2026-11-01, configuration 1 |") {
		t.Errorf("README:\n%s", doc)
	}
}

func TestUncommitted(t *testing.T) {
	status := " M operator/nodeset/nodeset_bench_test.go\n M README.md\n M bench/results.json\n?? bench/operator-500-cpu.pprof\n" +
		"R  old.go -> new.go\n?? docs/NOTES.md\nA  bench/bench.go\n"
	got := uncommitted(status)
	if want := []string{"operator/nodeset/nodeset_bench_test.go", "new.go", "bench/bench.go"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("uncommitted = %q, want %q (what make bench writes and documentation left out)", got, want)
	}
}
