// Command run is `make bench`: it runs the benchmarks bench.Runs lists, writes bench/results.json and
// the README's performance table from them, and prints the table. BENCH_PKGS narrows it to some packages
// (for example BENCH_PKGS="./web ./tui"; BENCH_PKGS=none only renders the table again); the other figures
// keep their values, commits, dates and configurations from the last results.json. So does every figure
// of a run that failed, timed out or did not report it: make bench then says so and exits non-zero.
// Raw go test output is kept under bin/bench.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/lvms-dev/lvms/bench"
	"github.com/lvms-dev/lvms/e2e/hostinfo"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

const (
	resultsFile = "bench/results.json"
	readme      = "README.md"
	rawDir      = "bin/bench"
)

func main() {
	p, err := provenance()
	if err == nil {
		b := &bencher{dir: ".", figures: bench.Figures, runs: bench.Runs, only: strings.Fields(os.Getenv("BENCH_PKGS")),
			goTest: goTest, now: time.Now, provenance: p, log: os.Stdout}
		err = b.run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bencher is one make bench in the repository at dir.
type bencher struct {
	dir     string
	figures []bench.Figure
	runs    []bench.Run
	only    []string // packages to run; none: all
	// goTest runs one round of r, writing its output to out; an error is a failed round.
	goTest func(r bench.Run, out io.Writer) error
	// now is the clock that dates the figures a run measures.
	now        func() time.Time
	provenance bench.Provenance
	log        io.Writer
}

func (c *bencher) run() error {
	var previous bench.Results
	resultsPath, readmePath := filepath.Join(c.dir, resultsFile), filepath.Join(c.dir, readme)
	if data, err := os.ReadFile(resultsPath); err == nil {
		if err := json.Unmarshal(data, &previous); err != nil {
			return fmt.Errorf("%s: %w (delete it to start afresh)", resultsFile, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var measured []bench.Measured
	var problems []string
	for _, r := range c.runs {
		if len(c.only) > 0 && !slices.Contains(c.only, r.Package) {
			continue
		}
		m, err := c.runOne(r)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s failed, its figures kept as they were: %v", r.Package, r.Bench, err))
			continue
		}
		var unreported []string
		for _, f := range c.figures {
			if _, ok := m.Values[f.Benchmark][f.Metric]; r.Selects(f) && !ok {
				unreported = append(unreported, f.Name)
			}
		}
		if len(unreported) > 0 {
			problems = append(problems, fmt.Sprintf("%s %s passed without reporting %s (skipped, or a metric not reported in every round): kept as they were",
				r.Package, r.Bench, strings.Join(unreported, ", ")))
		}
		measured = append(measured, m)
	}
	figures, evalErr := bench.Evaluate(c.figures, measured, previous.Figures, c.provenance)
	res := bench.Results{Figures: figures}
	data, err := bench.JSON(res)
	if err != nil {
		return err
	}
	if err := writeFile(resultsPath, data); err != nil {
		return err
	}
	table := bench.Table(res)
	doc, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	if doc, err = bench.Splice(doc, table); err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	if err := writeFile(readmePath, doc); err != nil {
		return err
	}
	fmt.Fprint(c.log, "\n"+table)
	if len(problems) > 0 {
		return fmt.Errorf("not every figure was measured (output under %s):\n  %s", rawDir, strings.Join(problems, "\n  "))
	}
	return evalErr
}

// runOne runs one go test invocation r.Rounds times and returns the median of its measurements, dated by
// the clock when the last round ended. A failed round fails the run: none of its values is used, the
// passed rounds' neither (a figure is the median of every round).
func (c *bencher) runOne(r bench.Run) (bench.Measured, error) {
	var rounds []map[string]map[string]float64
	m := bench.Measured{Run: r}
	n := max(r.Rounds, 1)
	for i := range n {
		if n > 1 {
			fmt.Fprintf(c.log, "round %d of %d\n", i+1, n)
		}
		var out bytes.Buffer
		runErr := c.goTest(r, &out)
		got, err := bench.Parse(bufio.NewReader(&out))
		if runErr != nil {
			err = runErr
		}
		if err != nil {
			if n > 1 {
				return bench.Measured{}, fmt.Errorf("round %d of %d: %w", i+1, n, err)
			}
			return bench.Measured{}, err
		}
		rounds = append(rounds, got.Values)
		for _, p := range got.Processes {
			if !slices.Contains(m.Processes, p) {
				m.Processes = append(m.Processes, p)
			}
		}
	}
	m.Values, m.Ended = bench.Median(rounds), c.now()
	return m, nil
}

// goTest runs one round of r, echoing its output and keeping it (the last round's) under rawDir.
func goTest(r bench.Run, out io.Writer) error {
	if err := os.MkdirAll(rawDir, 0o755); err != nil {
		return err
	}
	raw := filepath.Join(rawDir, strings.NewReplacer("./", "", "/", "_").Replace(r.Package)+"-"+strings.Trim(strings.NewReplacer("^", "", "$", "", "|", "_", "(", "", ")", "").Replace(r.Bench), "_")+".txt")
	f, err := os.Create(raw)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Printf("%s\n", r.Command())
	cmd := exec.Command("go", r.Args()...)
	profiles, err := filepath.Abs("bench")
	if err != nil {
		return err
	}
	cmd.Env = append(os.Environ(), testenv.ProfileDirEnv+"="+profiles)
	w := io.MultiWriter(os.Stdout, f, out)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test: %w", err)
	}
	return nil
}

// writeFile replaces path's content at once (a make bench stopped while writing leaves the old file).
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// provenance is what the figures measured now share: the commit checked out (and the files changed from
// it), the Go runtime's environment and this machine.
func provenance() (bench.Provenance, error) {
	commit, err := output("git", "rev-parse", "--short", "HEAD")
	if err != nil {
		return bench.Provenance{}, fmt.Errorf("the commit to record: %w", err)
	}
	status, err := exec.Command("git", "status", "--porcelain").Output() // not trimmed: a line starts with its status
	if err != nil {
		return bench.Provenance{}, fmt.Errorf("the uncommitted files to record: %w", err)
	}
	goVersion, _ := output("go", "env", "GOVERSION")
	m := bench.Machine{Cores: runtime.NumCPU(), GoVersion: goVersion, CPU: hostinfo.CPU(), MemoryGiB: hostinfo.MemoryGiB()}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return bench.Provenance{Commit: commit, Uncommitted: uncommitted(string(status)), Environment: bench.Environment(os.LookupEnv), Machine: m}, nil
}

// uncommitted are the files git status --porcelain lists that can change a measurement: not the files
// make bench writes (results, profiles, the README) nor other documentation.
func uncommitted(porcelain string) []string {
	var files []string
	for line := range strings.Lines(porcelain) {
		line = strings.TrimRight(line, "\n")
		if len(line) < 4 {
			continue
		}
		path := line[3:]
		if _, to, renamed := strings.Cut(path, " -> "); renamed {
			path = to
		}
		path = strings.Trim(path, `"`)
		if strings.HasSuffix(path, ".md") || path == resultsFile || (strings.HasPrefix(path, "bench/") && strings.HasSuffix(path, ".pprof")) {
			continue
		}
		files = append(files, path)
	}
	return files
}

func output(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return strings.TrimSpace(string(out)), err
}
