// Command run is `make bench`: it runs the benchmarks bench.Runs lists, writes bench/results.json and
// the README's performance table from them, and prints the table. BENCH_PKGS narrows it to some packages
// (for example BENCH_PKGS="./web ./tui"); the other figures keep their values from the last results.json.
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
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var previous bench.Results
	if data, err := os.ReadFile(resultsFile); err == nil {
		if err := json.Unmarshal(data, &previous); err != nil {
			return fmt.Errorf("%s: %w (delete it to start afresh)", resultsFile, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	only := strings.Fields(os.Getenv("BENCH_PKGS"))
	if err := os.MkdirAll(rawDir, 0o755); err != nil {
		return err
	}
	measured := map[string]map[string]map[string]float64{}
	var failed []string
	for _, r := range bench.Runs {
		if len(only) > 0 && !slices.Contains(only, r.Package) {
			continue
		}
		got, err := runOne(r)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s %s: %v", r.Package, r.Bench, err))
		}
		if measured[r.Package] == nil {
			measured[r.Package] = map[string]map[string]float64{}
		}
		for name, m := range got {
			measured[r.Package][name] = m
		}
	}
	m := machine()
	figures, evalErr := bench.Evaluate(bench.Figures, measured, previous.Figures, m.Commit)
	res := bench.Results{Machine: m, Figures: figures}
	if len(measured) == 0 && previous.Machine.CPU != "" {
		res.Machine = previous.Machine // nothing measured now: the figures are still those of that machine and commit
	}
	data, err := bench.JSON(res)
	if err != nil {
		return err
	}
	if err := os.WriteFile(resultsFile, data, 0o644); err != nil {
		return err
	}
	table := bench.Table(res)
	doc, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	if doc, err = bench.Splice(doc, table); err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	if err := os.WriteFile(readme, doc, 0o644); err != nil {
		return err
	}
	fmt.Print("\n" + table)
	if len(failed) > 0 {
		return fmt.Errorf("benchmarks failed (output under %s):\n  %s", rawDir, strings.Join(failed, "\n  "))
	}
	return evalErr
}

// runOne runs one go test invocation r.Rounds times, echoing and keeping its output (the last round's under
// rawDir), and returns the median of its measurements.
func runOne(r bench.Run) (map[string]map[string]float64, error) {
	var rounds []map[string]map[string]float64
	for i := range max(r.Rounds, 1) {
		if r.Rounds > 1 {
			fmt.Printf("round %d of %d\n", i+1, r.Rounds)
		}
		got, err := runRound(r)
		if err != nil {
			return bench.Median(append(rounds, got)), err
		}
		rounds = append(rounds, got)
	}
	return bench.Median(rounds), nil
}

func runRound(r bench.Run) (map[string]map[string]float64, error) {
	raw := filepath.Join(rawDir, strings.NewReplacer("./", "", "/", "_").Replace(r.Package)+"-"+strings.Trim(strings.NewReplacer("^", "", "$", "", "|", "_", "(", "", ")", "").Replace(r.Bench), "_")+".txt")
	f, err := os.Create(raw)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fmt.Printf("go %s\n", strings.Join(r.Args(), " "))
	var out bytes.Buffer
	cmd := exec.Command("go", r.Args()...)
	profiles, err := filepath.Abs("bench")
	if err != nil {
		return nil, err
	}
	cmd.Env = append(os.Environ(), testenv.ProfileDirEnv+"="+profiles)
	w := io.MultiWriter(os.Stdout, f, &out)
	cmd.Stdout, cmd.Stderr = w, w
	runErr := cmd.Run()
	got, err := bench.Measurements(bufio.NewReader(&out))
	if err != nil {
		return got, err
	}
	return got, runErr
}

// machine describes this host from /proc, the go command and git.
func machine() bench.Machine {
	m := bench.Machine{Cores: runtime.NumCPU(), GoVersion: output("go", "env", "GOVERSION"), Commit: output("git", "rev-parse", "--short", "HEAD")}
	m.CPU, m.MemoryGiB = hostinfo.CPU(), hostinfo.MemoryGiB()
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

func output(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
