package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A gremlins result over one package: its counts, its survivors with the survivors file's reasons (an
// unlisted one without), the row recorded beside the other packages' rows and the README table from them.
func TestReportRecordAndTable(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	write(t, "pkg/a/a.go", "package a\n\nfunc f(x int) bool {\n\treturn x > 0\n}\n\nfunc g(x int) int { return x + 1 }\n")
	write(t, "survivors.txt", "# comment\npkg/a/a.go CONDITIONALS_BOUNDARY `return x > 0` -- equivalent: x is never 0\n"+
		"pkg/a/a.go CONDITIONALS_NEGATION:3 `func g(x int) int { return x + 1 }` -- only the one at column 3\n")
	write(t, "result.json", `{"files":[{"file_name":"a.go","mutations":[
		{"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":4,"column":11},
		{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":4,"column":11},
		{"type":"ARITHMETIC_BASE","status":"LIVED","line":7,"column":29},
		{"type":"ARITHMETIC_BASE","status":"TIMED OUT","line":7,"column":29},
		{"type":"INCREMENT_DECREMENT","status":"NOT COVERED","line":7,"column":29},
		{"type":"INVERT_NEGATIVES","status":"NOT VIABLE","line":7,"column":29},
		{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":7,"column":1},
		{"type":"CONDITIONALS_NEGATION","status":"LIVED","line":7,"column":3},
		{"type":"CONDITIONALS_NEGATION","status":"LIVED","line":7,"column":9}]}]}`)
	write(t, "scores.json", `{"packages":[{"package":"z/other","files":["o.go"],"killed":3,"lived":1,"score":75,"commit":"abc1234","date":"2026-01-02",
		"survivors":[{"file":"z/other/o.go","line":9,"mutator":"INVERT_LOGICAL","source":"a && b","reason":"equivalent"}]},
		{"package":"pkg/a","files":["old.go"],"killed":1,"score":100,"commit":"0000000","date":"2025-01-01"}]}`)
	write(t, "README.md", "intro\n"+BeginMarker+"\nold table\n"+EndMarker+"\nrest\n")

	err := run("pkg/a", "a.go b.go", "survivors.txt", "scores.json", "1234567-dirty", "2026-02-03", "README.md", []string{"result.json"})
	if err != errUnlisted {
		t.Fatalf("run = %v, want errUnlisted (the ARITHMETIC_BASE survivor is not listed)", err)
	}
	s, err := readScores("scores.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := packages(s); !slices.Equal(got, []string{"pkg/a", "z/other"}) {
		t.Fatalf("rows %v, want pkg/a replaced and z/other kept", got)
	}
	a := s.Packages[0]
	want := Row{Package: "pkg/a", Files: []string{"a.go", "b.go"}, Killed: 2, Lived: 4, TimedOut: 1, NotCovered: 1, NotViable: 1,
		Score: 33.3, Commit: "1234567-dirty", Date: "2026-02-03", Survivors: []Survivor{
			{File: "pkg/a/a.go", Line: 4, Column: 11, Mutator: "CONDITIONALS_BOUNDARY", Source: "return x > 0", Reason: "equivalent: x is never 0"},
			{File: "pkg/a/a.go", Line: 7, Column: 3, Mutator: "CONDITIONALS_NEGATION", Source: "func g(x int) int { return x + 1 }", Reason: "only the one at column 3"},
			{File: "pkg/a/a.go", Line: 7, Column: 9, Mutator: "CONDITIONALS_NEGATION", Source: "func g(x int) int { return x + 1 }"},
			{File: "pkg/a/a.go", Line: 7, Column: 29, Mutator: "ARITHMETIC_BASE", Source: "func g(x int) int { return x + 1 }"},
		}}
	if !rowsEqual(a, want) {
		t.Errorf("row\n%+v\nwant\n%+v", a, want)
	}
	if s.Packages[1].Survivors[0].Reason != "equivalent" || s.Packages[1].Killed != 3 {
		t.Errorf("the other package's row changed: %+v", s.Packages[1])
	}
	readme := read(t, "README.md")
	for _, w := range []string{
		"intro\n" + BeginMarker + "\n| package |",
		"| `pkg/a` | a.go, b.go | 33.3% | 2 | 4 | 1 | 1 | 1234567-dirty (2026-02-03) |",
		"| `z/other` | o.go | 75.0% | 3 | 1 | 0 | 0 | abc1234 (2026-01-02) |",
		"- `pkg/a` a.go:4 CONDITIONALS_BOUNDARY: equivalent: x is never 0\n",
		"- `pkg/a` a.go:7 CONDITIONALS_NEGATION, a.go:7 ARITHMETIC_BASE: **not listed in e2e/tools/mutate-survivors.txt**\n",
		"- `pkg/a` a.go:7 CONDITIONALS_NEGATION: only the one at column 3\n",
		"\n" + EndMarker + "\nrest\n",
	} {
		if !strings.Contains(readme, w) {
			t.Errorf("README lacks %q:\n%s", w, readme)
		}
	}
	if strings.Contains(readme, "old table") {
		t.Error("README keeps the old table")
	}

	// With nothing measured the table is written again from the file alone.
	write(t, "README.md", "intro\n"+BeginMarker+"\nstale\n"+EndMarker+"\n")
	if err := run("", "", "", "scores.json", "", "", "README.md", nil); err != nil {
		t.Fatal(err)
	}
	if r := read(t, "README.md"); !strings.Contains(r, "| `z/other` |") || strings.Contains(r, "stale") {
		t.Errorf("README not rewritten from the scores file:\n%s", r)
	}
}

func TestScore(t *testing.T) {
	for _, c := range []struct {
		killed, lived int
		want          float64
	}{{0, 0, 100}, {41, 0, 100}, {69, 6, 92}, {106, 8, 93}, {126, 15, 89.4}, {2, 1, 66.7}, {1, 2, 33.3}} {
		if got := score(c.killed, c.lived); got != c.want {
			t.Errorf("score(%d, %d) = %v, want %v", c.killed, c.lived, got, c.want)
		}
	}
}

func TestSurvivorsNeedReasons(t *testing.T) {
	t.Chdir(t.TempDir())
	write(t, "s.txt", "pkg/a/a.go CONDITIONALS_BOUNDARY `x > 0`\n")
	if _, err := readSurvivors("s.txt"); err == nil || !strings.Contains(err.Error(), "s.txt:1") {
		t.Errorf("a survivor without reason: %v, want an error naming the line", err)
	}
}

// TestREADMEShowsScores: the README's mutation table is the one written from e2e/tools/mutate-scores.json,
// and every row of that file is a package make mutate measures, over the files it mutates, with its
// survivors listed and reasoned.
func TestREADMEShowsScores(t *testing.T) {
	s, err := readScores("../tools/mutate-scores.json")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Splice(readme, Table(s))
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(readme) {
		t.Error("README.md's mutation table is not the one e2e/tools/mutate-scores.json gives: run MUTATE_PKGS=none e2e/tools/mutate.sh")
	}
	targets := mutateTargets(t)
	commit := regexp.MustCompile(`^[0-9a-f]{7,}(-dirty)?$`)
	date := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	for _, r := range s.Packages {
		files, ok := targets[r.Package]
		// A row measured in parts covers its files and lists the ones still to measure.
		covered := append(slices.Clone(r.Files), r.Partial...)
		if !ok {
			t.Errorf("%s: in the scores file, not a target of e2e/tools/mutate.sh", r.Package)
		} else if !slices.Equal(slices.Sorted(slices.Values(files)), slices.Sorted(slices.Values(covered))) {
			t.Errorf("%s: measured over %v, mutate.sh now mutates %v: measure it again", r.Package, covered, files)
		}
		for _, c := range strings.Split(r.Commit, "+") {
			if !commit.MatchString(c) || !date.MatchString(r.Date) {
				t.Errorf("%s: commit %q, date %q", r.Package, r.Commit, r.Date)
			}
		}
		if r.Score != score(r.Killed, r.Lived) {
			t.Errorf("%s: score %v, but %d killed and %d lived give %v", r.Package, r.Score, r.Killed, r.Lived, score(r.Killed, r.Lived))
		}
		if r.Note != "" {
			continue // carried from the hand-written table: its survivors are in its note
		}
		if len(r.Survivors) != r.Lived {
			t.Errorf("%s: %d lived, %d survivors", r.Package, r.Lived, len(r.Survivors))
		}
		for _, v := range r.Survivors {
			if v.Reason == "" {
				t.Errorf("%s: survivor %s:%d %s without a reason in mutate-survivors.txt", r.Package, v.File, v.Line, v.Mutator)
			}
		}
	}
	for pkg := range targets {
		if !slices.Contains(packages(s), pkg) {
			t.Logf("%s: a target of mutate.sh not measured yet", pkg)
		}
	}
}

// mutateTargets reads the package and files of each target in e2e/tools/mutate.sh.
func mutateTargets(t *testing.T) map[string][]string {
	script := read(t, "../tools/mutate.sh")
	start := strings.Index(script, "targets=(")
	end := strings.Index(script[start:], "\n)")
	if start < 0 || end < 0 {
		t.Fatal("no targets=( ... ) in mutate.sh")
	}
	out := map[string][]string{}
	for _, l := range strings.Split(script[start:start+end], "\n")[1:] {
		l = strings.Trim(strings.TrimSpace(l), `"`)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Split(l, ";")
		if len(f) < 2 {
			t.Fatalf("mutate.sh target %q", l)
		}
		out[strings.TrimSpace(f[0])] = strings.Fields(f[1])
	}
	if len(out) == 0 {
		t.Fatal("no targets in mutate.sh")
	}
	return out
}

func packages(s Scores) []string {
	var out []string
	for _, r := range s.Packages {
		out = append(out, r.Package)
	}
	return out
}

func rowsEqual(a, b Row) bool {
	return a.Package == b.Package && slices.Equal(a.Files, b.Files) && a.Killed == b.Killed && a.Lived == b.Lived &&
		a.TimedOut == b.TimedOut && a.NotCovered == b.NotCovered && a.NotViable == b.NotViable && a.Score == b.Score &&
		a.Commit == b.Commit && a.Date == b.Date && a.Note == b.Note && slices.Equal(a.Survivors, b.Survivors)
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A package measured in parts: the row is partial until every file is measured at one tree, then sums
// the parts; a part at another tree (the package changed) or on a dirty tree starts over.
func TestParts_JoinAtOneTreeOnly(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	write(t, "pkg/m/a.go", "package m\n\nfunc f(x int) bool { return x > 0 }\n")
	write(t, "pkg/m/b.go", "package m\n\nfunc g(x int) bool { return x < 0 }\n")
	write(t, "survivors.txt", "pkg/m/b.go CONDITIONALS_BOUNDARY `func g(x int) bool { return x < 0 }` -- equivalent here\n")
	write(t, "a.json", `{"files":[{"file_name":"a.go","mutations":[{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":3,"column":30},
		{"type":"CONDITIONALS_BOUNDARY","status":"KILLED","line":3,"column":30}]}]}`)
	write(t, "b.json", `{"files":[{"file_name":"b.go","mutations":[{"type":"CONDITIONALS_NEGATION","status":"KILLED","line":3,"column":30},
		{"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":3,"column":30}]}]}`)
	write(t, "README.md", BeginMarker+"\n"+EndMarker+"\n")
	part := func(files, tree, commit, result string) Row {
		t.Helper()
		if err := runPart("pkg/m", files, "a.go b.go", tree, "survivors.txt", "scores.json", commit, "2026-12-0"+commit[len(commit)-1:], "README.md", []string{result}); err != nil {
			t.Fatal(err)
		}
		s, err := readScores("scores.json")
		if err != nil {
			t.Fatal(err)
		}
		return s.Packages[0]
	}

	r := part("a.go", "tree1", "c1", "a.json")
	if !slices.Equal(r.Partial, []string{"b.go"}) || r.Killed != 2 || r.Score != 100 {
		t.Fatalf("after a.go: %+v, want partial without b.go, 2 killed", r)
	}
	if readme := read(t, "README.md"); !strings.Contains(readme, "a.go (partial: not yet b.go)") {
		t.Errorf("the README does not say the row is partial:\n%s", readme)
	}
	r = part("b.go", "tree1", "c2", "b.json")
	if len(r.Partial) != 0 || !slices.Equal(r.Files, []string{"a.go", "b.go"}) || r.Killed != 3 || r.Lived != 1 || r.Score != 75 ||
		r.Commit != "c1+c2" || r.Date != "2026-12-02" || len(r.Survivors) != 1 || r.Survivors[0].Reason != "equivalent here" {
		t.Fatalf("both parts at one tree: %+v, want them summed", r)
	}
	if readme := read(t, "README.md"); !strings.Contains(readme, "| `pkg/m` | a.go, b.go | 75.0% | 3 | 1 | 0 | 0 | c1+c2 (2026-12-02) (in parts, package unchanged between them) |") {
		t.Errorf("README:\n%s", readme)
	}
	// b.go measured again at another tree: a.go's part described other code.
	r = part("b.go", "tree2", "c3", "b.json")
	if !slices.Equal(r.Partial, []string{"a.go"}) || r.Killed != 1 || r.Commit != "c3" {
		t.Fatalf("a part at a new tree: %+v, want only it, a.go unmeasured", r)
	}
	// A part of a dirty tree joins nothing.
	r = part("a.go", "", "c4-dirty", "a.json")
	if !slices.Equal(r.Partial, []string{"b.go"}) || len(r.Parts) != 1 {
		t.Fatalf("a dirty part: %+v, want it alone", r)
	}
	// A whole measurement replaces the parts.
	if err := run("pkg/m", "a.go b.go", "survivors.txt", "scores.json", "c5", "2026-12-05", "", []string{"a.json"}); err != nil {
		t.Fatal(err)
	}
	if s, _ := readScores("scores.json"); len(s.Packages[0].Parts) != 0 || len(s.Packages[0].Partial) != 0 {
		t.Errorf("a whole run kept parts: %+v", s.Packages[0])
	}
}

// A survivor reasoned after its measurement gets its reason in the scores file and the table without
// measuring again, in a row and in its parts; a survivor still unlisted keeps none.
func TestFillReasons_FromTheSurvivorsFileNow(t *testing.T) {
	t.Chdir(t.TempDir())
	write(t, "s.txt", "pkg/a/a.go CONDITIONALS_BOUNDARY:9 `x > 0` -- equivalent: x is never 0\n")
	accepted, err := readSurvivors("s.txt")
	if err != nil {
		t.Fatal(err)
	}
	lived := func() []Survivor {
		return []Survivor{
			{File: "pkg/a/a.go", Line: 3, Column: 9, Mutator: "CONDITIONALS_BOUNDARY", Source: "x > 0"},
			{File: "pkg/a/a.go", Line: 7, Column: 2, Mutator: "INVERT_LOGICAL", Source: "a && b"},
		}
	}
	s := Scores{Packages: []Row{{Package: "pkg/a", Survivors: lived(), Parts: []Row{{Package: "pkg/a", Survivors: lived()}}}}}
	if !fillReasons(&s, accepted) {
		t.Fatal("fillReasons reported no change")
	}
	for _, vs := range [][]Survivor{s.Packages[0].Survivors, s.Packages[0].Parts[0].Survivors} {
		if vs[0].Reason != "equivalent: x is never 0" || vs[1].Reason != "" {
			t.Errorf("reasons %q, %q: want the listed one filled and the other left empty", vs[0].Reason, vs[1].Reason)
		}
	}
	if fillReasons(&s, accepted) {
		t.Error("a second fillReasons changed something again")
	}
}
