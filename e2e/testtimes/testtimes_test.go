package testtimes

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// testdata/gotestsum.json is gotestsum's --jsonfile of a real `go test -json ./...` over a small module: a
// package that passes (with subtests), a slow one (with a parallel test), one with a failing and a skipped
// test, one whose test panics, one whose test does not build, one without tests.
func TestParse_RecordedSample(t *testing.T) {
	f, err := os.Open("testdata/gotestsum.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, err := Parse(f, "example.com/sample")
	if err != nil {
		t.Fatal(err)
	}
	wantPkgs := []Package{
		{Package: "broken", Seconds: 0, Result: "build failed"},
		{Package: "failing", Seconds: 0.006, Result: "fail", Tests: 3},
		{Package: "fast", Seconds: 0.006, Result: "pass", Tests: 4},
		{Package: "panics", Seconds: 0.012, Result: "fail", Tests: 2},
		{Package: "slow", Seconds: 3.016, Result: "pass", Tests: 4},
	}
	if !slices.Equal(rec.Packages, wantPkgs) {
		t.Errorf("packages\n%+v\nwant (notests has none; broken did not build)\n%+v", rec.Packages, wantPkgs)
	}
	// gotestsum printed "DONE 13 tests, 1 skipped, 3 failures, 1 error in 3.523s" for this run: two tests and
	// the package that did not build failed (the error is its compiler's message).
	if want := (Counts{Total: 13, Failed: 3, Skipped: 1}); rec.Tests != want {
		t.Errorf("counts %+v, want %+v", rec.Tests, want)
	}
	wantTests := []Test{
		{"slow", "TestSlower", 1.5, "pass"}, {"slow", "TestSlow", 1.2, "pass"}, {"slow", "TestParallel", 0.3, "pass"},
		{"failing", "TestFails", 0, "fail"}, {"failing", "TestPasses", 0, "pass"}, {"failing", "TestSkips", 0, "skip"},
		{"fast", "TestQuick", 0, "pass"}, {"fast", "TestTable", 0, "pass"},
		{"panics", "TestOK", 0, "pass"}, {"panics", "TestPanics", 0, "fail"},
	}
	if !slices.Equal(rec.Slowest, wantTests) {
		t.Errorf("slowest tests\n%+v\nwant top-level tests only, slowest first\n%+v", rec.Slowest, wantTests)
	}
}

// Only the ten slowest top-level tests are kept; the module's root package is ".".
func TestParse_TenSlowest(t *testing.T) {
	var in strings.Builder
	for i := range 12 {
		fmt.Fprintf(&in, `{"Action":"pass","Package":"m","Test":"Test%02d","Elapsed":%d}`+"\n", i, i)
		fmt.Fprintf(&in, `{"Action":"pass","Package":"m","Test":"Test%02d/sub","Elapsed":%d}`+"\n", i, 100+i)
	}
	in.WriteString(`{"Action":"pass","Package":"m","Elapsed":200}` + "\n")
	rec, err := Parse(strings.NewReader(in.String()), "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Slowest) != SlowestTests || rec.Slowest[0].Test != "Test11" || rec.Slowest[9].Test != "Test02" {
		t.Errorf("slowest %+v, want Test11 down to Test02", rec.Slowest)
	}
	if rec.Packages[0].Package != "." || rec.Tests.Total != 24 {
		t.Errorf("packages %+v, counts %+v", rec.Packages, rec.Tests)
	}
}

// Anything that is not a stream of go test -json events is an error saying which line, never a panic.
func TestParse_Malformed(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "no package result"},
		{"only output", `{"Action":"output","Package":"m","Output":"ok\n"}` + "\n", "no package result"},
		{"text", `{"Action":"pass","Package":"m","Elapsed":1}` + "\nok  \tm\t1.0s\n", "line 2 is not a go test -json event"},
		{"cut short", `{"Action":"pass","Package":"m","Elapsed":1}` + "\n" + `{"Action":"pass","Pack`, "line 2 is not a go test -json event"},
		{"wrong type", `{"Action":"pass","Package":"m","Elapsed":"1s"}`, "line 1 is not a go test -json event"},
		{"array", `[1,2]`, "line 1 is not a go test -json event"},
		{"negative", `{"Action":"pass","Package":"m","Elapsed":-1}`, "line 1: elapsed time -1 s out of range"},
		{"huge", `{"Action":"pass","Package":"m","Test":"T","Elapsed":1e308}`, "line 1: elapsed time 1e+308 s out of range"},
		{"no package", "\n\n" + `{"Action":"fail","Elapsed":1}`, `line 3: a "fail" event without a package`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in), "m")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	sample, err := os.ReadFile("testdata/gotestsum.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte(`{"Action":"pass","Package":"m","Test":"T","Elapsed":1e308}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		rec, err := Parse(bytes.NewReader(in), "example.com/sample")
		if err != nil {
			return
		}
		if len(rec.Packages) == 0 || len(rec.Slowest) > SlowestTests {
			t.Fatalf("a record with %d packages and %d slowest tests", len(rec.Packages), len(rec.Slowest))
		}
		data, err := JSON(rec)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Read(data)
		if err != nil {
			t.Fatalf("the record does not read back: %v\n%s", err, data)
		}
		if again, err := JSON(back); err != nil || !bytes.Equal(again, data) || Section(back) != Section(rec) {
			t.Fatalf("the record read back is not the one written (%v):\n%s\n%s", err, data, again)
		}
	})
}

func TestJSONReadBack(t *testing.T) {
	rec := record()
	data, err := JSON(rec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Read(data)
	if err != nil || !reflect.DeepEqual(back, rec) {
		t.Errorf("read back %+v (%v)", back, err)
	}
	if !bytes.Contains(data, []byte("`make test` <")) {
		t.Errorf("text is escaped:\n%s", data)
	}
	for _, bad := range []string{"", "{", `{"commit": 3}`, `{"packages": [], "extra": 1}`} {
		if _, err := Read([]byte(bad)); err == nil || !strings.Contains(err.Error(), "not a test-times record") {
			t.Errorf("Read(%q): %v", bad, err)
		}
	}
}

func TestHuman(t *testing.T) {
	for s, want := range map[float64]string{
		0: "0 ms", 0.205: "205 ms", 0.9996: "1.0 s", 16.103: "16.1 s", 59.96: "1 min 0 s", 101.143: "1 min 41 s",
		1403.02: "23 min 23 s", 4967.806: "1 h 22 min 48 s",
	} {
		if got := Human(s); got != want {
			t.Errorf("Human(%v) = %q, want %q", s, got, want)
		}
	}
}

func record() Record {
	rec := Record{
		Source: "The last `make test`", Note: "`make test` <note>", Commit: "abc1234", Date: "2026-12-02", Started: "2026-12-02T08:00:00Z",
		Machine:     Machine{CPU: "AMD EPYC", Cores: 2, MemoryGiB: 24, Cache: Warm},
		GoTestFlags: "-count=1 -timeout 60m",
		Phases:      Phases{GoTest: 1800, VMLane: 1800, OtherLane: 900, Fuzz: 300.4, FuzzTime: "20000x", FuzzResult: "ok", BenchSmoke: 150, BenchSmokeResult: "ok", Whole: 2200},
		VMLane:      "-parallel 2 -p 1 ./e2e/vm",
		Tests:       Counts{Total: 30, Failed: 1, Skipped: 2},
		Slowest:     []Test{{"e2e/vm", "TestVMBoot", 100, "pass"}, {"api", "TestSamples", 2.5, "fail"}},
	}
	for i := range 12 {
		rec.Packages = append(rec.Packages, Package{Package: fmt.Sprintf("p%02d", i), Seconds: float64(i * 10), Result: "pass", Tests: 2})
	}
	rec.Packages[3].Result = "fail"
	return rec
}

func TestSection(t *testing.T) {
	want := "The last `make test` at commit `abc1234`, 2026-12-02, AMD EPYC, 2 cores, 24 GiB, warm (`e2e/tools/test-times.json`).\n" +
		"go test flags: `-count=1 -timeout 60m`.\n" +
		"\n`make test` <note>\n" +
		"\n| phase | time |\n|---|---|\n" +
		"| `go test ./...` through gotestsum, building included: 30 tests (1 failed, 2 skipped) | 30 min 0 s |\n" +
		"| the VM lane: the packages whose tests boot VMs, one after the other (`-parallel 2 -p 1 ./e2e/vm`) | 30 min 0 s |\n" +
		"| beside it, the other lane: the other packages one at a time | 15 min 0 s |\n" +
		"| then in the other lane: the benchmarks' smoke (every benchmark once at its smallest size) (ok) | 2 min 30 s |\n" +
		"| then in the other lane: the fuzz targets, one after the other, 20000x each (ok) | 5 min 0 s |\n" +
		"| `make test` in all: deps, image, lint, both lanes, summary | 36 min 40 s |\n" +
		"\nThe 10 slowest packages, each its test binary's run time (one at a time in each lane):\n\n" +
		"| package | time | result |\n|---|---|---|\n" +
		"| `p11` | 1 min 50 s | pass |\n| `p10` | 1 min 40 s | pass |\n| `p09` | 1 min 30 s | pass |\n| `p08` | 1 min 20 s | pass |\n" +
		"| `p07` | 1 min 10 s | pass |\n| `p06` | 1 min 0 s | pass |\n| `p05` | 50.0 s | pass |\n| `p04` | 40.0 s | pass |\n" +
		"| `p03` | 30.0 s | **fail** |\n| `p02` | 20.0 s | pass |\n" +
		"\nThe other 2 packages: 10.0 s together.\n" +
		"\nThe 2 slowest tests (top-level, with their subtests):\n\n| test | package | time | result |\n|---|---|---|---|\n" +
		"| `TestVMBoot` | `e2e/vm` | 1 min 40 s | pass |\n| `TestSamples` | `api` | 2.5 s | **fail** |\n"
	if got := Section(record()); got != want {
		t.Errorf("Section:\n%s\nwant:\n%s", got, want)
	}

	// What a record entered by hand may lack.
	sparse := Record{Source: "CI's run", Commit: "2ded9ad", Date: "2026-12-01", Phases: Phases{GoTest: 4967.806}, Tests: Counts{Total: 5},
		Packages: []Package{{Package: "a", Seconds: 2, Result: "pass"}}}
	got := Section(sparse)
	for _, w := range []string{"CI's run at commit `2ded9ad`, 2026-12-01, machine and cache not recorded (", ": 5 tests | 1 h 22 min 48 s |",
		"| the fuzz targets, one after the other | not measured |", "summary | not measured |", "The 1 slowest packages",
		"\nNo per-test times in this record.\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("a sparse record's section lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "packages:") {
		t.Errorf("no other packages, yet:\n%s", got)
	}
}

func TestSplice(t *testing.T) {
	doc := []byte("a\n" + BeginMarker + "\nold\n" + EndMarker + "\nb\n")
	got, err := Splice(doc, "new\n")
	if err != nil || string(got) != "a\n"+BeginMarker+"\nnew\n"+EndMarker+"\nb\n" {
		t.Errorf("Splice = %q, %v", got, err)
	}
	if _, err := Splice([]byte(EndMarker+BeginMarker), "x"); err == nil {
		t.Error("markers out of order: no error")
	}
}

func TestJudge(t *testing.T) {
	budget := Budget{Limit: 35 * time.Minute, Cores: 2}
	run := func(whole float64, cores int, cache string, pkgs ...Package) Record {
		return Record{Commit: "new1234", Date: "2026-12-03", Machine: Machine{Cores: cores, Cache: cache}, Phases: Phases{Whole: whole}, Packages: pkgs}
	}
	prev := &Record{Commit: "old1234", Date: "2026-12-01", Phases: Phases{Whole: 1900}, Packages: []Package{
		{Package: "e2e/sharedvm", Seconds: 1400}, {Package: "e2e/node", Seconds: 1000}, {Package: "api", Seconds: 10}, {Package: "gone", Seconds: 5}}}
	grown := []Package{{Package: "e2e/sharedvm", Seconds: 1700}, {Package: "e2e/node", Seconds: 990}, {Package: "api", Seconds: 70}, {Package: "new/pkg", Seconds: 42}}

	for _, tc := range []struct {
		name         string
		cur          Record
		prev         *Record
		judged, over bool
		want         []string
		not          []string
	}{
		{name: "8 cores", cur: run(3000, 8, Warm), prev: prev,
			want: []string{"not judged: it is for a 2-core machine and this one has 8 cores."}},
		{name: "cores unknown", cur: run(3000, 0, Warm),
			want: []string{"this one has an unknown number of cores"}},
		{name: "cold", cur: run(3000, 2, Cold), prev: prev,
			want: []string{"not judged: it is for warm runs and this one was cold"}},
		{name: "cache not recorded", cur: run(3000, 2, ""),
			want: []string{"not judged: it is for warm runs and this one's cache was not recorded."}},
		{name: "whole not measured", cur: run(0, 2, Warm),
			want: []string{"not judged: the whole run's time was not measured"}},
		{name: "within", cur: run(2100, 2, Warm, grown...), prev: prev, judged: true,
			want: []string{"make test took 35 min 0 s warm on 2 cores, within 35 min 0 s (0 ms to spare)"}, not: []string{"e2e/sharedvm"}},
		{name: "over", cur: run(2400, 2, Warm, grown...), prev: prev, judged: true, over: true,
			want: []string{
				"test-time budget exceeded: make test took 40 min 0 s warm on 2 cores, over 35 min 0 s by 5 min 0 s.\n" +
					"Compared with the committed record (commit old1234, 2026-12-01, whole run 31 min 40 s):\n" +
					"  e2e/sharedvm                     23 min 20 s → 28 min 20 s (+5 min 0 s)\n" +
					"  api                              10.0 s → 1 min 10 s (+1 min 0 s)\n" +
					"  not in the committed record, 42.0 s together: new/pkg (42.0 s)\n"},
			not: []string{"e2e/node"}},
		{name: "over, nothing grew", cur: run(2400, 2, Warm, Package{Package: "api", Seconds: 1}), prev: prev, judged: true, over: true,
			want: []string{"  no package grew.\n"}},
		{name: "over, no previous record", cur: run(2400, 2, Warm, grown...), judged: true, over: true,
			want: []string{"No committed record to compare with; the slowest packages:\n  e2e/sharedvm                     28 min 20 s\n  e2e/node "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.cur, tc.prev, budget)
			if v.Judged != tc.judged || v.Over != tc.over {
				t.Errorf("judged %v, over %v; want %v, %v", v.Judged, v.Over, tc.judged, tc.over)
			}
			for _, w := range tc.want {
				if !strings.Contains(v.Report, w) {
					t.Errorf("report lacks %q:\n%s", w, v.Report)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(v.Report, n) {
					t.Errorf("report names %q:\n%s", n, v.Report)
				}
			}
			if !strings.HasSuffix(v.Report, "\n") {
				t.Errorf("report %q does not end a line", v.Report)
			}
		})
	}
}

// A run over the budget names at most ten grown packages, most grown first, and counts the rest.
func TestJudge_ManyGrew(t *testing.T) {
	var prev, cur Record
	for i := range 13 {
		name := fmt.Sprintf("p%02d", i)
		prev.Packages = append(prev.Packages, Package{Package: name, Seconds: 10})
		cur.Packages = append(cur.Packages, Package{Package: name, Seconds: float64(11 + i)})
	}
	cur.Machine, cur.Phases.Whole = Machine{Cores: 2, Cache: Warm}, 3600
	v := Judge(cur, &prev, Budget{Limit: 35 * time.Minute, Cores: 2})
	if !strings.Contains(v.Report, "  p12 ") || strings.Contains(v.Report, "  p02 ") || !strings.Contains(v.Report, "and 3 more that grew less") {
		t.Errorf("report:\n%s", v.Report)
	}
	grew, added := Grew(cur, prev)
	if len(grew) != 13 || grew[0].Package != "p12" || grew[0].Before != 10 || grew[0].After != 23 || len(added) != 0 {
		t.Errorf("Grew: %+v, %+v", grew, added)
	}
}

// TestREADMEShowsTimes: the README's test-time section is the one e2e/tools/test-times.json gives, and the
// file is as make test writes it.
func TestREADMEShowsTimes(t *testing.T) {
	data, err := os.ReadFile("../tools/test-times.json")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Splice(readme, Section(rec))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, readme) {
		t.Error("README.md's test-time section is not the one e2e/tools/test-times.json gives: run go run ./e2e/testtimes/run")
	}
	if canonical, err := JSON(rec); err != nil || !bytes.Equal(canonical, data) {
		t.Errorf("e2e/tools/test-times.json is not as make test writes it (%v): fields missing, unsorted or reformatted", err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{7,}(-dirty)?$`).MatchString(rec.Commit) || !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(rec.Date) {
		t.Errorf("commit %q, date %q", rec.Commit, rec.Date)
	}
	if rec.Started != "" {
		if s, err := time.Parse(time.RFC3339, rec.Started); err != nil || s.UTC().Format(time.DateOnly) != rec.Date {
			t.Errorf("started %q (%v), date %q", rec.Started, err, rec.Date)
		}
	}
	if c := rec.Machine.Cache; c != "" && c != Warm && c != Cold {
		t.Errorf("cache %q", c)
	}
	if !slices.IsSortedFunc(rec.Packages, func(a, b Package) int { return strings.Compare(a.Package, b.Package) }) {
		t.Error("packages are not sorted")
	}
	if len(rec.Packages) == 0 || len(rec.Slowest) > SlowestTests {
		t.Errorf("%d packages, %d slowest tests", len(rec.Packages), len(rec.Slowest))
	}
	if !slices.IsSortedFunc(rec.Slowest, func(a, b Test) int { return cmp.Compare(b.Seconds, a.Seconds) }) {
		t.Error("slowest tests are not slowest first")
	}
}

// The host CPU e2e/vm logs at each VM's end is added up per package, from the note's own text; other output
// that only looks alike is not counted.
func TestParse_VMCPU(t *testing.T) {
	out := func(pkg, test, line string) string {
		return fmt.Sprintf(`{"Action":"output","Package":"m/%s","Test":%q,"Output":%q}`+"\n", pkg, test, line)
	}
	in := out("vm", "TestVMA", "    run.go:302: VM a: guest command started 9.5s after qemu, exited with 0 after 1m2s; "+VMCPUNote(61500*time.Millisecond)+"\n") +
		out("vm", "TestVMB/sub", "    run.go:294: VM b: killed by the test; "+VMCPUNote(2*time.Second)+"\n") +
		out("vm", "TestVMB", "    host CPU used by qemu: many s\n") + // not a number
		out("other", "TestX", "the host CPU used by qemu: is a phrase here\n") +
		`{"Action":"pass","Package":"m/vm","Elapsed":70}` + "\n" + `{"Action":"pass","Package":"m/other","Elapsed":1}` + "\n"
	rec, err := Parse(strings.NewReader(in), "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{{Package: "other", Seconds: 1, Result: "pass"}, {Package: "vm", Seconds: 70, Result: "pass", VMCPU: 63.5}}
	if !slices.Equal(rec.Packages, want) {
		t.Errorf("packages %+v, want %+v", rec.Packages, want)
	}
	sec := Section(rec)
	for _, w := range []string{"| package | time | host CPU of its VMs | result |", "| `vm` | 1 min 10 s | 1 min 4 s | pass |", "| `other` | 1.0 s | – | pass |",
		"The VMs of the run used 1 min 4 s of host CPU in all"} {
		if !strings.Contains(sec, w) {
			t.Errorf("the section lacks %q:\n%s", w, sec)
		}
	}
}

func TestCPUBusy(t *testing.T) {
	//           user nice system idle iowait irq softirq steal guest guest_nice
	before := "cpu  1000 0 500 8000 100 0 10 0 0 0"
	after := "cpu  1600 100 700 8300 200 0 10 0 50 0" // 600+100+200 busy, 300+100 idle or waiting
	got, err := CPUBusy(before, after)
	if err != nil || got != 69.2 {
		t.Errorf("CPUBusy = %v, %v; want 69.2 (900 of 1300 ticks busy)", got, err)
	}
	for _, c := range []struct{ before, after, want string }{
		{"", after, "the first reading"},
		{before, "cpu0 1 2 3 4 5 6 7 8", "not /proc/stat's cpu line"},
		{before, "cpu 1 2 3", "not /proc/stat's cpu line"},
		{before, "cpu 1600 x 700 8300 200 0 10 0", "field 2"},
		{after, before, "went back"},
		{before, before, "no CPU time passed"},
	} {
		if _, err := CPUBusy(c.before, c.after); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CPUBusy(%q, %q) = %v; want an error naming %q", c.before, c.after, err, c.want)
		}
	}
}
