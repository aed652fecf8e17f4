// Command run is the last step of `make test`: from gotestsum's JSON file and the phase times the Makefile
// measured, it writes e2e/tools/test-times.json and the README's test-time section, then judges the run
// against the time budget (TEST_BUDGET, 88 minutes today, for a warm make test on the 2-core machine) and prints the verdict
// last, comparing every package's time with the previously committed record. It exits 1 when the run is
// over the budget.
//
// Without -json it only writes the README's section from the record: `go run ./e2e/testtimes/run`.
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/lvms-dev/lvms/e2e/hostinfo"
	"github.com/lvms-dev/lvms/e2e/testtimes"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
}

var errOver = errors.New("over the test-time budget")

func run(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("testtimes", flag.ContinueOnError)
	jsonFile := fl.String("json", "", "gotestsum's --jsonfile of the run (go test -json events); without it, only the README is written from -out")
	out := fl.String("out", "e2e/tools/test-times.json", "the record to write")
	readme := fl.String("readme", "README.md", "the README whose test-time section is written from the record")
	previous := fl.String("previous", "", "the previously committed record, to compare package times with (missing or empty: none)")
	commit := fl.String("commit", "", "the short commit the run started at, with -dirty when tracked files differed")
	start := fl.String("start", "", "the run's start, RFC 3339")
	cache := fl.String("cache", "", "warm, or cold when the run built the control-plane or node binaries")
	goTest := fl.Duration("go-test", 0, "wall time of the go test phase")
	fuzz := fl.Duration("fuzz", 0, "wall time of the fuzz phase")
	fuzzTime := fl.String("fuzz-time", "", "the -fuzztime each fuzz target ran for")
	fuzzResult := fl.String("fuzz-result", "", "ok or FAILED")
	vmLane := fl.Duration("vm-lane", 0, "wall time of the VM lane's go test")
	otherLane := fl.Duration("other-lane", 0, "wall time of the other lane's go test")
	vmLaneFlags := fl.String("vm-lane-flags", "", "the VM lane's own go test flags and packages")
	benchSmoke := fl.Duration("bench-smoke", 0, "wall time of the benchmarks' smoke")
	benchSmokeResult := fl.String("bench-smoke-result", "", "ok, FAILED or off")
	whole := fl.Duration("whole", 0, "wall time of the whole make test")
	flags := fl.String("go-test-flags", "", "the flags go test was given")
	budget := fl.Duration("budget", 88*time.Minute, "the longest a warm make test may take on a -budget-cores machine")
	mod := fl.String("module", "", "the module path go test prefixes packages with (default: go.mod's)")
	budgetCores := fl.Int("budget-cores", 2, "the machine the budget is for: its number of cores")
	cpuBefore := fl.String("cpu-before", "", "/proc/stat's cpu line read when the go test phase began")
	cpuAfter := fl.String("cpu-after", "", "/proc/stat's cpu line read when it ended")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}

	if *jsonFile == "" {
		data, err := os.ReadFile(*out)
		if err != nil {
			return err
		}
		rec, err := testtimes.Read(data)
		if err != nil {
			return fmt.Errorf("%s: %w", *out, err)
		}
		return writeReadme(*readme, rec)
	}

	started, err := time.Parse(time.RFC3339, *start)
	if err != nil {
		return fmt.Errorf("-start: %w", err)
	}
	if *cache != testtimes.Warm && *cache != testtimes.Cold {
		return fmt.Errorf("-cache is %q: warm or cold", *cache)
	}
	if *commit == "" {
		return errors.New("-commit is needed")
	}
	f, err := os.Open(*jsonFile)
	if err != nil {
		return err
	}
	rec, err := testtimes.Parse(f, cmp.Or(*mod, module()))
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *jsonFile, err)
	}
	rec.Source = "The last `make test`"
	rec.Commit = *commit
	rec.Date, rec.Started = started.UTC().Format(time.DateOnly), started.UTC().Format(time.RFC3339)
	rec.Machine = machine(*cache)
	rec.GoTestFlags, rec.VMLane = *flags, *vmLaneFlags
	rec.Phases = testtimes.Phases{GoTest: seconds(*goTest), VMLane: seconds(*vmLane), OtherLane: seconds(*otherLane), Fuzz: seconds(*fuzz), FuzzTime: *fuzzTime, FuzzResult: *fuzzResult,
		BenchSmoke: seconds(*benchSmoke), BenchSmokeResult: *benchSmokeResult, Whole: seconds(*whole)}
	if *cpuBefore != "" || *cpuAfter != "" {
		if rec.Phases.GoTestCPUBusy, err = testtimes.CPUBusy(*cpuBefore, *cpuAfter); err != nil {
			return fmt.Errorf("-cpu-before, -cpu-after: %w", err)
		}
	}

	var prev *testtimes.Record
	if *previous != "" {
		switch data, err := os.ReadFile(*previous); {
		case errors.Is(err, fs.ErrNotExist) || err == nil && len(data) == 0:
		case err != nil:
			return err
		default:
			p, err := testtimes.Read(data)
			if err != nil {
				fmt.Fprintf(os.Stderr, "testtimes: the previous record %s: %v; package times are not compared\n", *previous, err)
			} else {
				prev = &p
			}
		}
	}

	data, err := testtimes.JSON(rec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return err
	}
	if err := writeReadme(*readme, rec); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "---- test times: wrote %s and %s's test-time section (commit them) ----\n", *out, *readme)
	v := testtimes.Judge(rec, prev, testtimes.Budget{Limit: *budget, Cores: *budgetCores})
	fmt.Fprint(stdout, v.Report)
	if v.Over {
		return errOver
	}
	return nil
}

func writeReadme(readme string, rec testtimes.Record) error {
	doc, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	if doc, err = testtimes.Splice(doc, testtimes.Section(rec)); err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	return os.WriteFile(readme, doc, 0o644)
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// module is the module path in go.mod, which go test -json prefixes every package with.
func module() string {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(data)) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	return ""
}

// machine describes this machine: its CPU, the cores Go may use (nproc's count), its memory.
func machine(cache string) testtimes.Machine {
	m := testtimes.Machine{Cores: runtime.NumCPU(), Cache: cache}
	m.CPU, m.MemoryGiB = hostinfo.CPU(), hostinfo.MemoryGiB()
	return m
}
