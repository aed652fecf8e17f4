package testtimes

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// EndBenchmarks copies go test -json events from r to w and adds the end events go test leaves out for the
// benchmarks that pass: test2json reports a benchmark's start ("run"), its failure and its skip, never its
// success (golang/go#66825), and gotestsum counts a test that never ended as failed ("(unknown)",
// gotestsum#332), so make test's benchmark smoke would list every benchmark as a failure. A benchmark
// passed when it printed its result line ("BenchmarkX-2  1  123 ns/op"); one with sub-benchmarks, which
// prints none, when the next benchmark that is not one of its own starts (a test binary runs its
// benchmarks one after another, and a failure is reported before the next starts), or when its package
// passes. A benchmark still running when its package fails is left without an end: the binary died in it,
// and gotestsum reports it failed. Every line of r reaches w unchanged.
func EndBenchmarks(r io.Reader, w io.Writer) error {
	br := bufio.NewReader(r)
	running := map[string]map[string]time.Time{} // package → benchmark → when it started
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var e benchEvent
			if json.Unmarshal(line, &e) != nil {
				e = benchEvent{} // not an event: copied as it is
			}
			var before, after []benchEvent
			switch {
			case e.Package == "":
			case e.Test == "" && e.Action == "pass":
				before = endAll(running, e, func(string) bool { return true })
			case !strings.HasPrefix(e.Test, "Benchmark"):
			case e.Action == "run":
				before = endAll(running, e, func(name string) bool { return !strings.HasPrefix(e.Test, name+"/") })
				if running[e.Package] == nil {
					running[e.Package] = map[string]time.Time{}
				}
				running[e.Package][e.Test] = e.Time
			case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
				delete(running[e.Package], e.Test)
			case e.Action == "output" && isResultLine(e.Test, e.Output):
				after = endAll(running, e, func(name string) bool { return name == e.Test })
			}
			for _, ev := range before {
				if err := writeEvent(w, ev); err != nil {
					return err
				}
			}
			if _, err := w.Write(line); err != nil {
				return err
			}
			for _, ev := range after {
				if err := writeEvent(w, ev); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// benchEvent is the part of a go test -json event EndBenchmarks reads and writes.
type benchEvent struct {
	Time    time.Time `json:"Time"`
	Action  string    `json:"Action"`
	Package string    `json:"Package"`
	Test    string    `json:"Test,omitempty"`
	Elapsed *float64  `json:"Elapsed,omitempty"`
	Output  string    `json:"Output,omitempty"`
}

// endAll ends, as passed at e's time, the benchmarks of e's package still running that ended says have
// ended, sub-benchmarks before their parents.
func endAll(running map[string]map[string]time.Time, e benchEvent, ended func(name string) bool) []benchEvent {
	var names []string
	for name := range running[e.Package] {
		if ended(name) {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var out []benchEvent
	for _, name := range names {
		elapsed := ms(e.Time.Sub(running[e.Package][name]).Seconds())
		out = append(out, benchEvent{Time: e.Time, Action: "pass", Package: e.Package, Test: name, Elapsed: &elapsed})
		delete(running[e.Package], name)
	}
	return out
}

func writeEvent(w io.Writer, e benchEvent) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// resultFigures is a benchmark's result line after its name: the iteration count, a tab and the figures.
// testing prints the name (with its GOMAXPROCS suffix and padding) before the last runs and the figures
// once they are done, so they come as one output event or as two.
var resultFigures = regexp.MustCompile(`^\s*\d+\t[^\n]*\n$`)

// namePadding is the GOMAXPROCS suffix and the padding after a benchmark's name on its result line.
var namePadding = regexp.MustCompile(`^(-\d+)?\s+`)

// isResultLine tells whether output is (the end of) benchmark name's result line.
func isResultLine(name, output string) bool {
	if rest, ok := strings.CutPrefix(output, name); ok {
		output = namePadding.ReplaceAllString(rest, "")
	}
	return resultFigures.MatchString(output)
}
