// Package testtimes holds what `make test` measured about itself: the wall time of its go test phase, of its
// fuzz phase and of the whole run, every package's time and the ten slowest tests, with the commit, the date and
// the machine (e2e/tools/test-times.json). It reads gotestsum's JSON file (go test -json events), renders the
// README's test-time section from a record, and judges a record against the time budget, naming the packages
// that grew since the previous record. `make test` runs it through e2e/testtimes/run.
//
// Nothing here reads a clock: the run's start and its phase times are given by the caller.
package testtimes

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lvms-dev/lvms/docsection"
)

// SlowestTests is how many tests a record lists.
const SlowestTests = 10

// Record is the content of e2e/tools/test-times.json.
type Record struct {
	// Source says what measured the record: "make test", or where figures entered by hand come from.
	Source string `json:"source"`
	// Note, when set, says what the record holds and lacks; the README shows it.
	Note string `json:"note,omitempty"`
	// Commit is the short commit the run started at, "-dirty" when tracked files differed from it (apart from
	// the files make test writes: README.md and the record itself).
	Commit string `json:"commit"`
	// Date is the day the run started (UTC, YYYY-MM-DD); Started the start itself (RFC 3339), when known.
	Date    string  `json:"date"`
	Started string  `json:"started,omitempty"`
	Machine Machine `json:"machine"`
	// GoTestFlags are the flags make test gave go test (GO_TEST_FLAGS): a narrowed run says so.
	GoTestFlags string `json:"goTestFlags,omitempty"`
	// VMLane is what the VM lane's go test got besides GoTestFlags: its flags and packages.
	VMLane string `json:"vmLane,omitempty"`
	Phases Phases `json:"phases"`
	Tests  Counts `json:"tests"`
	// Packages holds every package that ran tests, sorted by package.
	Packages []Package `json:"packages"`
	// Slowest holds the slowest top-level tests (each with its subtests), slowest first, at most SlowestTests.
	Slowest []Test `json:"slowestTests"`
}

// Machine is where the run happened. Zero fields were not recorded.
type Machine struct {
	CPU       string `json:"cpu,omitempty"`
	Cores     int    `json:"cores,omitempty"`
	MemoryGiB int    `json:"memoryGiB,omitempty"`
	// Cache is "warm", or "cold" when the run built the control-plane or node binaries into $LVMS_CACHE.
	Cache string `json:"cache,omitempty"`
}

// Warm and Cold are the values of Machine.Cache.
const (
	Warm = "warm"
	Cold = "cold"
)

// Phases are wall times in seconds; zero: not measured.
type Phases struct {
	// GoTest is `go test ./...` through gotestsum, building included: both lanes, from their start to the end
	// of the later one.
	GoTest float64 `json:"goTestSeconds,omitempty"`
	// VMLane is the go test of the packages whose tests boot VMs, one after the other; OtherLane the go test
	// of the other packages beside it, after which that lane runs the benchmarks' smoke and the fuzz run.
	VMLane    float64 `json:"vmLaneSeconds,omitempty"`
	OtherLane float64 `json:"otherLaneSeconds,omitempty"`
	// Fuzz is e2e/tools/fuzz.sh: every fuzz target, one after the other, for FuzzTime each, in the other
	// lane after the benchmarks' smoke.
	Fuzz       float64 `json:"fuzzSeconds,omitempty"`
	FuzzTime   string  `json:"fuzzTime,omitempty"`
	FuzzResult string  `json:"fuzzResult,omitempty"` // "ok" or "FAILED"
	// BenchSmoke is the benchmarks' smoke: a go test of its own, every benchmark once at its smallest size,
	// in the other lane after its tests, before the fuzz run.
	BenchSmoke       float64 `json:"benchSmokeSeconds,omitempty"`
	BenchSmokeResult string  `json:"benchSmokeResult,omitempty"` // "ok", "FAILED" or "off"
	// Whole is make test from its start to the end of its summary: deps, image, lint, go test, fuzz.
	Whole float64 `json:"wholeSeconds,omitempty"`
	// GoTestCPUBusy is the share of the machine's CPU time (all cores) that was busy during the go test
	// phase, in percent: near 100, the suite is bound by the work it does, and only less work makes it
	// shorter; well below, by waiting or by too little running at once.
	GoTestCPUBusy float64 `json:"goTestCPUBusyPercent,omitempty"`
}

// Counts count tests as gotestsum's DONE line does: every test and subtest that ended; Failed also counts each
// package that failed outside its tests (its build, TestMain, a panic between tests).
type Counts struct {
	Total   int `json:"total"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// Package is one package's test binary: its run time (go test's Elapsed, not its build) and result.
type Package struct {
	Package string  `json:"package"`
	Seconds float64 `json:"seconds"`
	Result  string  `json:"result"`          // "pass", "fail" or "build failed"
	Tests   int     `json:"tests,omitempty"` // tests and subtests that ended
	// VMCPU is the host CPU time the package's VMs used (qemu's user and system time, from e2e/vm's
	// VMCPUNote lines): under emulation the VM lane's real cost.
	VMCPU float64 `json:"vmCPUSeconds,omitempty"`
}

// Test is one top-level test.
type Test struct {
	Package string  `json:"package"`
	Test    string  `json:"test"`
	Seconds float64 `json:"seconds"`
	Result  string  `json:"result"` // "pass", "fail" or "skip"
}

// event is the part of a go test -json event that matters here.
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     *float64
	FailedBuild string
	Output      string
}

// vmCPUPrefix starts the note e2e/vm logs when a VM ends.
const vmCPUPrefix = "host CPU used by qemu: "

// VMCPUNote is what e2e/vm logs when a VM ends: the host CPU time qemu used. Parse adds these up per package.
func VMCPUNote(d time.Duration) string {
	return fmt.Sprintf("%s%.1f s", vmCPUPrefix, d.Seconds())
}

// vmCPU reads the seconds of a VMCPUNote in an output line.
func vmCPU(output string) (float64, bool) {
	_, rest, ok := strings.Cut(output, vmCPUPrefix)
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, " s")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v >= 0 && v < maxSeconds) {
		return 0, false
	}
	return v, true
}

// CPUBusy is the share of CPU time, in percent, that was busy between two readings of /proc/stat's first
// line ("cpu  user nice system idle iowait irq softirq steal ..."): everything but idle and iowait.
func CPUBusy(before, after string) (float64, error) {
	b, err := cpuTimes(before)
	if err != nil {
		return 0, fmt.Errorf("the first reading: %w", err)
	}
	a, err := cpuTimes(after)
	if err != nil {
		return 0, fmt.Errorf("the second reading: %w", err)
	}
	var total, idle float64
	for i := range a {
		d := a[i] - b[i]
		if d < 0 {
			return 0, fmt.Errorf("CPU time field %d went back from %.0f to %.0f: not two readings of one machine in order", i+1, b[i], a[i])
		}
		total += d
		if i == 3 || i == 4 { // idle, iowait
			idle += d
		}
	}
	if total == 0 {
		return 0, errors.New("no CPU time passed between the readings")
	}
	return math.Round((total-idle)/total*1000) / 10, nil
}

// cpuTimes reads the eight counters of /proc/stat's "cpu" line (later fields, guest time, are counted in user
// already).
func cpuTimes(line string) ([8]float64, error) {
	var v [8]float64
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return v, fmt.Errorf("%.60q is not /proc/stat's cpu line", line)
	}
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return v, fmt.Errorf("%.60q: field %d: %w", line, i+1, err)
		}
		v[i] = float64(n)
	}
	return v, nil
}

// Parse reads go test -json events (gotestsum's --jsonfile) and returns a record holding the packages, the
// slowest tests and the counts; the caller fills in the rest. Package paths are given relative to module
// ("." for the module's root package). Every line must be a JSON event; an unreadable one is an error that
// names the line.
func Parse(r io.Reader, module string) (Record, error) {
	var rec Record
	pkgs := map[string]*Package{}
	failedIn := map[string]int{} // failed tests per package
	var tests []Test
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var e event
			if jerr := json.Unmarshal(line, &e); jerr != nil {
				return Record{}, fmt.Errorf("line %d is not a go test -json event (%w): %.80q", n, jerr, line)
			}
			if e.Elapsed != nil && !(*e.Elapsed >= 0 && *e.Elapsed < maxSeconds) {
				return Record{}, fmt.Errorf("line %d: elapsed time %v s out of range", n, *e.Elapsed)
			}
			if e.Action == "output" && e.Package != "" {
				if v, ok := vmCPU(e.Output); ok {
					name := relative(e.Package, module)
					if pkgs[name] == nil {
						pkgs[name] = &Package{Package: name}
					}
					pkgs[name].VMCPU = ms(pkgs[name].VMCPU + v)
				}
			}
			if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
				if e.Package == "" {
					return Record{}, fmt.Errorf("line %d: a %q event without a package", n, e.Action)
				}
				name := relative(e.Package, module)
				elapsed := 0.0
				if e.Elapsed != nil {
					elapsed = ms(*e.Elapsed)
				}
				p := pkgs[name]
				if p == nil {
					p = &Package{Package: name}
					pkgs[name] = p
				}
				switch {
				case e.Test != "":
					rec.Tests.Total++
					p.Tests++
					switch e.Action {
					case "fail":
						rec.Tests.Failed++
						failedIn[name]++
					case "skip":
						rec.Tests.Skipped++
					}
					if !strings.Contains(e.Test, "/") {
						tests = append(tests, Test{Package: name, Test: e.Test, Seconds: elapsed, Result: e.Action})
					}
				case e.Action == "skip":
					p.Result = "skip" // no test files, or no tests to run: not listed
				default:
					p.Seconds, p.Result = elapsed, e.Action
					if e.FailedBuild != "" {
						p.Result = "build failed"
					}
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Record{}, fmt.Errorf("line %d: %w", n, err)
		}
	}
	for _, p := range pkgs {
		switch p.Result {
		case "pass", "fail", "build failed":
			rec.Packages = append(rec.Packages, *p)
			if p.Result != "pass" && failedIn[p.Package] == 0 {
				rec.Tests.Failed++ // a package failed outside its tests (build, TestMain): gotestsum counts it too
			}
		case "", "skip":
			// A package without its own result (the run was cut short) or without tests: nothing to list.
		}
	}
	if len(rec.Packages) == 0 {
		return Record{}, errors.New("no package result in it: did go test run?")
	}
	slices.SortFunc(rec.Packages, func(a, b Package) int { return cmp.Compare(a.Package, b.Package) })
	rec.Slowest = slowest(tests)
	return rec, nil
}

// maxSeconds bounds a time read: no test runs for a year.
const maxSeconds = 365 * 24 * 3600

// ms rounds seconds to the millisecond, go test's precision.
func ms(seconds float64) float64 { return math.Round(seconds*1000) / 1000 }

func relative(pkg, module string) string {
	if pkg == module {
		return "."
	}
	return strings.TrimPrefix(pkg, module+"/")
}

func slowest(tests []Test) []Test {
	slices.SortFunc(tests, func(a, b Test) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.Package, b.Package), cmp.Compare(a.Test, b.Test))
	})
	return tests[:min(len(tests), SlowestTests)]
}

// JSON is the file's content: indented, with a final newline, text as written (no \u003c for <), times to the
// millisecond.
func JSON(rec Record) ([]byte, error) {
	rec.Packages = slices.Clone(rec.Packages)
	if rec.Packages == nil {
		rec.Packages = []Package{}
	}
	for i := range rec.Packages {
		rec.Packages[i].Seconds = ms(rec.Packages[i].Seconds)
	}
	rec.Slowest = slices.Clone(rec.Slowest)
	if rec.Slowest == nil {
		rec.Slowest = []Test{}
	}
	for i := range rec.Slowest {
		rec.Slowest[i].Seconds = ms(rec.Slowest[i].Seconds)
	}
	p := &rec.Phases
	p.GoTest, p.Fuzz, p.Whole = ms(p.GoTest), ms(p.Fuzz), ms(p.Whole)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rec); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Read reads a record written by JSON.
func Read(data []byte) (Record, error) {
	var rec Record
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return Record{}, fmt.Errorf("not a test-times record: %w", err)
	}
	return rec, nil
}

// Markers delimit the generated section in the README.
const (
	BeginMarker = "<!-- testtimes:begin (make test writes this section from e2e/tools/test-times.json) -->"
	EndMarker   = "<!-- testtimes:end -->"
)

// shownPackages is how many of the slowest packages the README lists.
const shownPackages = 10

// Section renders the record as the README shows it: where and when, the phases, the slowest packages and the
// slowest tests.
func Section(rec Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at commit `%s`, %s, %s (`e2e/tools/test-times.json`).\n", rec.Source, rec.Commit, rec.Date, machine(rec.Machine))
	if rec.GoTestFlags != "" {
		fmt.Fprintf(&b, "go test flags: `%s`.\n", rec.GoTestFlags)
	}
	if rec.Note != "" {
		b.WriteString("\n" + rec.Note + "\n")
	}
	tests := fmt.Sprintf("%d tests", rec.Tests.Total)
	if rec.Tests.Failed > 0 || rec.Tests.Skipped > 0 {
		tests += fmt.Sprintf(" (%d failed, %d skipped)", rec.Tests.Failed, rec.Tests.Skipped)
	}
	fuzz := "the fuzz targets, one after the other"
	if rec.Phases.OtherLane > 0 {
		fuzz = "then in the other lane: " + fuzz
	}
	if rec.Phases.FuzzTime != "" {
		fuzz += ", " + rec.Phases.FuzzTime + " each"
	}
	if rec.Phases.FuzzResult != "" {
		fuzz += " (" + rec.Phases.FuzzResult + ")"
	}
	if rec.Phases.GoTestCPUBusy > 0 {
		tests += fmt.Sprintf("; the machine's CPU %.0f%% busy", rec.Phases.GoTestCPUBusy)
	}
	b.WriteString("\n| phase | time |\n|---|---|\n")
	fmt.Fprintf(&b, "| `go test ./...` through gotestsum, building included: %s | %s |\n", tests, measured(rec.Phases.GoTest))
	if rec.Phases.VMLane > 0 || rec.Phases.OtherLane > 0 {
		vm := "the VM lane: the packages whose tests boot VMs, one after the other"
		if rec.VMLane != "" {
			vm += " (`" + rec.VMLane + "`)"
		}
		fmt.Fprintf(&b, "| %s | %s |\n", vm, measured(rec.Phases.VMLane))
		fmt.Fprintf(&b, "| beside it, the other lane: the other packages one at a time | %s |\n", measured(rec.Phases.OtherLane))
	}
	if rec.Phases.BenchSmoke > 0 || rec.Phases.BenchSmokeResult != "" {
		smoke := "the benchmarks' smoke (every benchmark once at its smallest size)"
		if rec.Phases.OtherLane > 0 {
			smoke = "then in the other lane: " + smoke
		}
		if rec.Phases.BenchSmokeResult != "" {
			smoke += " (" + rec.Phases.BenchSmokeResult + ")"
		}
		fmt.Fprintf(&b, "| %s | %s |\n", smoke, measured(rec.Phases.BenchSmoke))
	}
	fmt.Fprintf(&b, "| %s | %s |\n", fuzz, measured(rec.Phases.Fuzz))
	fmt.Fprintf(&b, "| `make test` in all: deps, image, lint, both lanes, summary | %s |\n", measured(rec.Phases.Whole))

	pkgs := slices.Clone(rec.Packages)
	slices.SortStableFunc(pkgs, func(a, b Package) int { return cmp.Compare(b.Seconds, a.Seconds) })
	shown := pkgs[:min(len(pkgs), shownPackages)]
	at := "go test runs as many at once as there are cores"
	if rec.Phases.OtherLane > 0 {
		at = "one at a time in each lane"
	}
	fmt.Fprintf(&b, "\nThe %d slowest packages, each its test binary's run time (%s):\n\n", len(shown), at)
	vms := slices.ContainsFunc(rec.Packages, func(p Package) bool { return p.VMCPU > 0 })
	if vms {
		b.WriteString("| package | time | host CPU of its VMs | result |\n|---|---|---|---|\n")
	} else {
		b.WriteString("| package | time | result |\n|---|---|---|\n")
	}
	for _, p := range shown {
		cells := []string{"`" + p.Package + "`", Human(p.Seconds)}
		if vms {
			cpu := "–"
			if p.VMCPU > 0 {
				cpu = Human(p.VMCPU)
			}
			cells = append(cells, cpu)
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(append(cells, result(p.Result)), " | "))
	}
	if rest := pkgs[len(shown):]; len(rest) > 0 {
		sum := 0.0
		for _, p := range rest {
			sum += p.Seconds
		}
		fmt.Fprintf(&b, "\nThe other %d packages: %s together.\n", len(rest), Human(sum))
	}
	if vms {
		sum := 0.0
		for _, p := range rec.Packages {
			sum += p.VMCPU
		}
		fmt.Fprintf(&b, "\nThe VMs of the run used %s of host CPU in all (qemu's user and system time, from e2e/vm's log).\n", Human(sum))
	}
	if len(rec.Slowest) == 0 {
		b.WriteString("\nNo per-test times in this record.\n")
		return b.String()
	}
	fmt.Fprintf(&b, "\nThe %d slowest tests (top-level, with their subtests):\n\n| test | package | time | result |\n|---|---|---|---|\n", len(rec.Slowest))
	for _, t := range rec.Slowest {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", t.Test, t.Package, Human(t.Seconds), result(t.Result))
	}
	return b.String()
}

func machine(m Machine) string {
	var parts []string
	if m.CPU != "" {
		parts = append(parts, m.CPU)
	}
	if m.Cores > 0 {
		parts = append(parts, fmt.Sprintf("%d cores", m.Cores))
	}
	if m.MemoryGiB > 0 {
		parts = append(parts, fmt.Sprintf("%d GiB", m.MemoryGiB))
	}
	if m.Cache != "" {
		parts = append(parts, m.Cache)
	}
	if len(parts) == 0 {
		return "machine and cache not recorded"
	}
	return strings.Join(parts, ", ")
}

func measured(seconds float64) string {
	if seconds <= 0 {
		return "not measured"
	}
	return Human(seconds)
}

func result(r string) string {
	if r == "pass" {
		return r
	}
	return "**" + r + "**"
}

// Human writes seconds as the README does: "1 h 2 min 3 s", "23 min 5 s", "37.9 s", "205 ms".
func Human(seconds float64) string {
	d := time.Duration(math.Round(seconds * float64(time.Second)))
	switch {
	case d.Round(time.Millisecond) < time.Second:
		return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
	case d.Round(100*time.Millisecond) < time.Minute:
		return fmt.Sprintf("%.1f s", d.Round(100*time.Millisecond).Seconds())
	}
	d = d.Round(time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	if h > 0 {
		return fmt.Sprintf("%d h %d min %d s", h, m, s)
	}
	return fmt.Sprintf("%d min %d s", m, s)
}

// Splice replaces the text between the markers in doc by section.
func Splice(doc []byte, section string) ([]byte, error) {
	return docsection.Splice(doc, BeginMarker, EndMarker, section)
}

// Budget is the bound on a whole make test, judged only on warm runs of a machine with Cores cores.
type Budget struct {
	Limit time.Duration
	Cores int
}

// Verdict is the budget's judgement of a record.
type Verdict struct {
	Judged bool // false: the run is not one the budget is for, or its whole time was not measured
	Over   bool
	Report string // what to print, one or more lines ending in a newline
}

// Growth is a package's time in the previous record and in this one.
type Growth struct {
	Package       string
	Before, After float64
}

// shownGrowth is how many grown packages a verdict over the budget names.
const shownGrowth = 10

// Judge judges cur against b; prev (nil: none) is the previously committed record, whose package times a run
// over the budget is compared with.
func Judge(cur Record, prev *Record, b Budget) Verdict {
	var why string
	switch {
	case cur.Machine.Cores != b.Cores:
		cores := "an unknown number of"
		if cur.Machine.Cores > 0 {
			cores = fmt.Sprint(cur.Machine.Cores)
		}
		why = fmt.Sprintf("it is for a %d-core machine and this one has %s cores", b.Cores, cores)
	case cur.Machine.Cache == Cold:
		why = "it is for warm runs and this one was cold (it built the control-plane or node binaries into $LVMS_CACHE)"
	case cur.Machine.Cache != Warm:
		why = "it is for warm runs and this one's cache was not recorded"
	case cur.Phases.Whole <= 0:
		why = "the whole run's time was not measured"
	}
	if why != "" {
		return Verdict{Report: fmt.Sprintf("test-time budget (%s warm on %d cores) not judged: %s.\n", Human(b.Limit.Seconds()), b.Cores, why)}
	}
	limit := b.Limit.Seconds()
	if cur.Phases.Whole <= limit {
		return Verdict{Judged: true, Report: fmt.Sprintf("test-time budget: make test took %s warm on %d cores, within %s (%s to spare).\n",
			Human(cur.Phases.Whole), b.Cores, Human(limit), Human(limit-cur.Phases.Whole))}
	}
	var r strings.Builder
	fmt.Fprintf(&r, "test-time budget exceeded: make test took %s warm on %d cores, over %s by %s.\n",
		Human(cur.Phases.Whole), b.Cores, Human(limit), Human(cur.Phases.Whole-limit))
	if prev == nil {
		r.WriteString("No committed record to compare with; the slowest packages:\n")
		pkgs := slices.Clone(cur.Packages)
		slices.SortStableFunc(pkgs, func(a, b Package) int { return cmp.Compare(b.Seconds, a.Seconds) })
		for _, p := range pkgs[:min(len(pkgs), shownGrowth)] {
			fmt.Fprintf(&r, "  %-32s %s\n", p.Package, Human(p.Seconds))
		}
		return Verdict{Judged: true, Over: true, Report: r.String()}
	}
	grew, added := Grew(cur, *prev)
	fmt.Fprintf(&r, "Compared with the committed record (commit %s, %s, whole run %s):\n", prev.Commit, prev.Date, measured(prev.Phases.Whole))
	if len(grew) == 0 {
		r.WriteString("  no package grew.\n")
	}
	for _, g := range grew[:min(len(grew), shownGrowth)] {
		fmt.Fprintf(&r, "  %-32s %s → %s (+%s)\n", g.Package, Human(g.Before), Human(g.After), Human(g.After-g.Before))
	}
	if len(grew) > shownGrowth {
		fmt.Fprintf(&r, "  and %d more that grew less\n", len(grew)-shownGrowth)
	}
	if len(added) > 0 {
		sum := 0.0
		names := make([]string, 0, len(added))
		for _, p := range added {
			sum += p.Seconds
			names = append(names, fmt.Sprintf("%s (%s)", p.Package, Human(p.Seconds)))
		}
		fmt.Fprintf(&r, "  not in the committed record, %s together: %s\n", Human(sum), strings.Join(names[:min(len(names), shownGrowth)], ", "))
		if len(names) > shownGrowth {
			fmt.Fprintf(&r, "  and %d more\n", len(names)-shownGrowth)
		}
	}
	return Verdict{Judged: true, Over: true, Report: r.String()}
}

// Grew returns the packages of cur that took longer than in prev, most grown first, and those prev does not
// hold, slowest first.
func Grew(cur, prev Record) (grew []Growth, added []Package) {
	before := map[string]float64{}
	for _, p := range prev.Packages {
		before[p.Package] = p.Seconds
	}
	for _, p := range cur.Packages {
		b, ok := before[p.Package]
		switch {
		case !ok:
			added = append(added, p)
		case p.Seconds > b:
			grew = append(grew, Growth{Package: p.Package, Before: b, After: p.Seconds})
		}
	}
	slices.SortFunc(grew, func(a, b Growth) int {
		return cmp.Or(cmp.Compare(b.After-b.Before, a.After-a.Before), cmp.Compare(a.Package, b.Package))
	})
	slices.SortFunc(added, func(a, b Package) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.Package, b.Package))
	})
	return grew, added
}
