package testtimes

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"gotest.tools/gotestsum/testjson"
)

// testdata/bench-*.json are real `go test -json -bench . -benchtime 1x` runs (go1.26.8) of a test file with a
// test and three benchmarks, BenchmarkPlain, BenchmarkSizes (sub-benchmarks nodes=5 and nodes=500) and
// BenchmarkLast, in which nodes=500 passes (pass), calls b.Fatal (fail) or panics, ending the binary (panic).

// TestEndBenchmarks_GotestsumCountsOnlyTheBenchmarksThatFailed: gotestsum, reading go test's own events,
// counts every benchmark that passed as a failure "(unknown)"; with EndBenchmarks' events added it counts
// none in a run that passed, only the failed ones in a run where one failed, and the ones the binary died in.
func TestEndBenchmarks_GotestsumCountsOnlyTheBenchmarksThatFailed(t *testing.T) {
	for _, tc := range []struct {
		scenario      string
		raw, withEnds []string
		testsWithEnds int
	}{
		{"pass", []string{"BenchmarkLast", "BenchmarkPlain", "BenchmarkSizes", "BenchmarkSizes/nodes=5", "BenchmarkSizes/nodes=500"}, nil, 6},
		{"fail", []string{"BenchmarkLast", "BenchmarkPlain", "BenchmarkSizes", "BenchmarkSizes/nodes=5", "BenchmarkSizes/nodes=500"},
			[]string{"BenchmarkSizes", "BenchmarkSizes/nodes=500"}, 6},
		{"panic", []string{"BenchmarkPlain", "BenchmarkSizes", "BenchmarkSizes/nodes=5", "BenchmarkSizes/nodes=500"},
			[]string{"BenchmarkSizes", "BenchmarkSizes/nodes=500"}, 5},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			in, err := os.ReadFile("testdata/bench-" + tc.scenario + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := failedInGotestsum(t, in); !slices.Equal(got, tc.raw) {
				t.Fatalf("gotestsum on go test's own events counts %q failed, want %q (the recording no longer shows the problem)", got, tc.raw)
			}
			var out bytes.Buffer
			if err := EndBenchmarks(bytes.NewReader(in), &out); err != nil {
				t.Fatal(err)
			}
			got, total := failedInGotestsum(t, out.Bytes())
			if !slices.Equal(got, tc.withEnds) {
				t.Errorf("gotestsum with EndBenchmarks' events counts %q failed, want %q", got, tc.withEnds)
			}
			if total != tc.testsWithEnds {
				t.Errorf("gotestsum counts %d tests, want %d (TestOK and every benchmark that ran)", total, tc.testsWithEnds)
			}
			if kept := withoutAdded(out.String()); kept != string(in) {
				t.Errorf("EndBenchmarks changed or dropped go test's own lines:\n%s\nwant\n%s", kept, in)
			}
		})
	}
}

// TestEndBenchmarks_KeepsWhatIsNotAnEvent: lines that are not go test events (a build's output on stdout)
// pass through as they are, with the events around them.
func TestEndBenchmarks_KeepsWhatIsNotAnEvent(t *testing.T) {
	in := "# example.com/smoke\nnot json {\n" + `{"Action":"start","Package":"p"}` + "\npartial line without a newline"
	var out bytes.Buffer
	if err := EndBenchmarks(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != in {
		t.Errorf("EndBenchmarks wrote %q, want %q", out.String(), in)
	}
}

// failedInGotestsum is what gotestsum's summary lists as failed (sorted) and its count of tests.
func failedInGotestsum(t *testing.T, events []byte) ([]string, int) {
	t.Helper()
	exec, err := testjson.ScanTestOutput(testjson.ScanConfig{Stdout: bytes.NewReader(events)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tc := range exec.Failed() {
		names = append(names, tc.Test.Name())
	}
	slices.Sort(names)
	return names, exec.Total()
}

// withoutAdded drops the events EndBenchmarks adds (a benchmark's "pass", which go test never writes).
func withoutAdded(events string) string {
	var kept []string
	for _, line := range strings.SplitAfter(events, "\n") {
		if strings.Contains(line, `"Action":"pass"`) && strings.Contains(line, `"Test":"Benchmark`) {
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "")
}
