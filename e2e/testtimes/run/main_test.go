package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/e2e/testtimes"
)

// The make step end to end on the recorded sample: the record and the README's section are written, and the
// verdict, printed last, fails a run over the budget naming the package that grew since the previous record.
func TestRun_WritesRecordAndJudges(t *testing.T) {
	dir := t.TempDir()
	sample, err := filepath.Abs("../testdata/gotestsum.json")
	if err != nil {
		t.Fatal(err)
	}
	out, readme, previous := filepath.Join(dir, "times.json"), filepath.Join(dir, "README.md"), filepath.Join(dir, "previous.json")
	write(t, readme, "intro\n"+testtimes.BeginMarker+"\nold\n"+testtimes.EndMarker+"\nrest\n")
	prev, err := testtimes.JSON(testtimes.Record{Source: "s", Commit: "0000000", Date: "2026-11-30",
		Packages: []testtimes.Package{{Package: "slow", Seconds: 1, Result: "pass"}, {Package: "fast", Seconds: 5, Result: "pass"}}})
	if err != nil {
		t.Fatal(err)
	}
	write(t, previous, string(prev))
	args := func(whole string, cores int) []string {
		return []string{"-json", sample, "-out", out, "-readme", readme, "-previous", previous, "-module", "example.com/sample",
			"-commit", "abc1234-dirty", "-start", "2026-12-02T23:30:00+01:00", "-cache", "warm", "-go-test", "4s", "-fuzz", "2m",
			"-fuzz-time", "20000x", "-fuzz-result", "ok", "-whole", whole, "-go-test-flags", "-count=1",
			"-budget", "1m", "-budget-cores", fmt.Sprint(cores),
			"-cpu-before", "cpu  100 0 0 300 0 0 0 0 0 0", "-cpu-after", "cpu  400 0 0 400 0 0 0 0 0 0"}
	}

	var stdout bytes.Buffer
	if err := run(args("3m", runtime.NumCPU()), &stdout); !errors.Is(err, errOver) {
		t.Fatalf("run = %v, want errOver (3 min against a 1 min budget)", err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := testtimes.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Commit != "abc1234-dirty" || rec.Date != "2026-12-02" || rec.Started != "2026-12-02T22:30:00Z" ||
		rec.Machine.Cores != runtime.NumCPU() || rec.Machine.Cache != "warm" || rec.GoTestFlags != "-count=1" ||
		rec.Phases != (testtimes.Phases{GoTest: 4, Fuzz: 120, FuzzTime: "20000x", FuzzResult: "ok", Whole: 180, GoTestCPUBusy: 75}) ||
		len(rec.Packages) != 5 || rec.Slowest[0].Test != "TestSlower" {
		t.Errorf("record:\n%s", data)
	}
	doc, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := testtimes.Splice([]byte("intro\n"+testtimes.BeginMarker+"\n"+testtimes.EndMarker+"\nrest\n"), testtimes.Section(rec)); !bytes.Equal(doc, want) {
		t.Errorf("README:\n%s", doc)
	}
	report := stdout.String()
	last := report[strings.Index(report, "test-time budget exceeded"):]
	if !strings.Contains(last, "  slow ") || !strings.Contains(last, "1.0 s → 3.0 s") || strings.Contains(last, "  fast ") ||
		!strings.Contains(last, "not in the committed record") || !strings.HasPrefix(report, "---- test times: wrote ") {
		t.Errorf("output:\n%s", report)
	}

	stdout.Reset()
	if err := run(args("30s", runtime.NumCPU()), &stdout); err != nil || !strings.Contains(stdout.String(), "within 1 min 0 s") {
		t.Errorf("within the budget: %v\n%s", err, stdout.String())
	}
	stdout.Reset()
	if err := run(args("3m", runtime.NumCPU()+1), &stdout); err != nil || !strings.Contains(stdout.String(), "not judged") {
		t.Errorf("another machine: %v\n%s", err, stdout.String())
	}

	// Without -json only the README is written, from the record.
	write(t, readme, "intro\n"+testtimes.BeginMarker+"\nstale\n"+testtimes.EndMarker+"\nrest\n")
	if err := run([]string{"-out", out, "-readme", readme}, &stdout); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(readme); !bytes.Equal(again, doc) {
		t.Errorf("README written from the record:\n%s", again)
	}
}

func TestRun_Refuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	write(t, bad, `{"Action":"pass","Package":"m","Elapsed":1}`+"\nnot json\n")
	write(t, filepath.Join(dir, "ok.json"), `{"Action":"pass","Package":"m","Elapsed":1}`+"\n")
	base := []string{"-out", filepath.Join(dir, "o.json"), "-readme", filepath.Join(dir, "R.md"), "-commit", "abc1234", "-start", "2026-12-02T10:00:00Z", "-cache", "warm"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"-json", bad}, base...), "bad.json: line 2 is not a go test -json event"},
		{append([]string{"-json", filepath.Join(dir, "missing.json")}, base...), "no such file"},
		{[]string{"-json", bad, "-start", "2026-12-02T10:00:00Z", "-cache", "lukewarm"}, `-cache is "lukewarm": warm or cold`},
		{[]string{"-json", bad, "-start", "yesterday"}, "-start"},
		{[]string{"-json", bad, "-start", "2026-12-02T10:00:00Z", "-cache", "cold"}, "-commit is needed"},
		{[]string{"stray"}, "unexpected arguments"},
		{append([]string{"-json", filepath.Join(dir, "ok.json"), "-cpu-before", "cpu 1 2 3 4 5 6 7 8", "-cpu-after", ""}, base...), "-cpu-before, -cpu-after: the second reading"},
	} {
		if err := run(tc.args, new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %q: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "o.json")); err == nil {
		t.Error("a refused run wrote the record")
	}
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
