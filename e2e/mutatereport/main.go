// Command mutatereport is the reporting half of `make mutate` (e2e/tools/mutate.sh).
//
// Given the JSON result of a gremlins run over one package, it prints the package's mutation score, records
// the package's row (counts, score, survivors with their reasons, the commit and its date) in the scores file
// (-scores, e2e/tools/mutate-scores.json), keeping the other packages' rows, and fails when a mutant lived
// that the survivors file does not list with a reason.
//
// With -readme it then writes the README's mutation table, between its markers, from the scores file; with
// -readme and no result it only does that, which is how `MUTATE_PKGS=none make mutate` regenerates the table.
//
// A survivors line is "<package>/<file> <MUTATOR>[:<column>] `<source line>` -- <why no test can or should
// kill it>"; it names the source line by its text, not its number, so it stays valid when lines move. The
// column tells apart two mutants of one kind on one line (without it, the line accepts both).
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/lvms-dev/lvms/docsection"
)

type result struct {
	Files []struct {
		Name      string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// Scores is the content of the scores file: one row per package, sorted by package.
type Scores struct {
	Packages []Row `json:"packages"`
}

// Row is one package's last measurement.
type Row struct {
	Package string   `json:"package"`
	Files   []string `json:"files"`
	// Killed, Lived, TimedOut, NotCovered and NotViable count gremlins' mutants by status; TimedOut and
	// NotViable are outside the score, NotCovered are mutants in lines no test of the package runs.
	Killed     int     `json:"killed"`
	Lived      int     `json:"lived"`
	TimedOut   int     `json:"timed_out"`
	NotCovered int     `json:"not_covered"`
	NotViable  int     `json:"not_viable,omitempty"`
	Score      float64 `json:"score"` // 100 * killed / (killed + lived), one decimal
	// Survivors are the lived mutants, each with the reason the survivors file gives (empty: not listed).
	Survivors []Survivor `json:"survivors,omitempty"`
	// Commit is the short commit measured at, with "-dirty" when the package's directory differed from it;
	// Date is that commit's date (git log --format=%cs).
	Commit string `json:"commit"`
	Date   string `json:"date"`
	// Note is set on rows not measured by this tool: where their figures come from.
	Note string `json:"note,omitempty"`
	// Tree is the git tree of the package's directory measured (empty when it was dirty): parts measured
	// at different commits describe one package only when their trees are the same.
	Tree string `json:"tree,omitempty"`
	// Parts are the measurements of some of the files each (MUTATE_FILES), for a package too slow to
	// measure in one run. The row sums them once they cover every file at one tree; until then it is partial.
	Parts []Row `json:"parts,omitempty"`
	// Partial lists the files not yet measured at the parts' tree (the row covers the others only).
	Partial []string `json:"partial,omitempty"`
}

// Survivor is a lived mutant.
type Survivor struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column,omitempty"`
	Mutator string `json:"mutator"`
	Source  string `json:"source"`
	Reason  string `json:"reason"`
}

func main() {
	pkg := flag.String("pkg", "", "the package the result is for, e.g. operator/usage")
	files := flag.String("files", "", "the files mutated, space-separated")
	survivorsFile := flag.String("survivors", "", "file listing the accepted survivors")
	scoresFile := flag.String("scores", "", "scores file to record the package's row in (the other rows are kept)")
	commit := flag.String("commit", "", "the short commit measured at (with -dirty if the package differed from it)")
	date := flag.String("date", "", "the commit's date, YYYY-MM-DD")
	readme := flag.String("readme", "", "write the mutation table of this README from the scores file")
	tree := flag.String("tree", "", "the git tree of the package's directory measured (empty when dirty)")
	all := flag.String("all-files", "", "with a part: every file of the package's mutation list, space-separated; the result covers -files only")
	flag.Parse()
	if err := runPart(*pkg, *files, *all, *tree, *survivorsFile, *scoresFile, *commit, *date, *readme, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mutatereport:", err)
		os.Exit(1)
	}
}

var errUnlisted = errors.New("lived mutants not listed as harmless")

func run(pkg, files, survivorsFile, scoresFile, commit, date, readme string, args []string) error {
	return runPart(pkg, files, "", "", survivorsFile, scoresFile, commit, date, readme, args)
}

// runPart is run for a result that covers files of the package's list all ("": the whole list).
func runPart(pkg, files, all, tree, survivorsFile, scoresFile, commit, date, readme string, args []string) error {
	var failed error
	switch {
	case len(args) == 1 && pkg != "":
		row, err := report(pkg, survivorsFile, args[0])
		if err != nil {
			return err
		}
		row.Files, row.Commit, row.Date, row.Tree = strings.Fields(files), commit, date, tree
		for _, s := range row.Survivors {
			if s.Reason == "" {
				fmt.Fprintf(os.Stderr, "  lived, not in %s: %s %s:%d `%s` -- (line %d) why is it harmless?\n", survivorsFile, s.File, s.Mutator, s.Column, s.Source, s.Line)
				failed = errUnlisted
			}
		}
		fmt.Println(row.Line())
		if scoresFile != "" {
			if err := record(scoresFile, row, strings.Fields(all)); err != nil {
				return err
			}
		}
	case len(args) == 0 && readme != "":
	default:
		return errors.New("usage: mutatereport -pkg <package> [-files f] [-survivors file] [-scores file -commit c -date d] [-readme README.md] <gremlins.json>\n" +
			"       mutatereport -scores file -readme README.md")
	}
	if readme != "" {
		if scoresFile == "" {
			return errors.New("-readme needs -scores")
		}
		s, err := readScores(scoresFile)
		if err != nil {
			return err
		}
		if survivorsFile != "" {
			accepted, err := readSurvivors(survivorsFile)
			if err != nil {
				return err
			}
			if fillReasons(&s, accepted) {
				if err := writeScores(scoresFile, s); err != nil {
					return err
				}
			}
		}
		doc, err := os.ReadFile(readme)
		if err != nil {
			return err
		}
		if doc, err = Splice(doc, Table(s)); err != nil {
			return fmt.Errorf("%s: %w", readme, err)
		}
		if err := os.WriteFile(readme, doc, 0o644); err != nil {
			return err
		}
	}
	return failed
}

// report reads one gremlins result and returns the package's row, without files, commit and date; a lived
// mutant the survivors file does not accept has an empty reason.
func report(pkg, survivorsFile, resultFile string) (Row, error) {
	data, err := os.ReadFile(resultFile)
	if err != nil {
		return Row{}, err
	}
	var r result
	if err := json.Unmarshal(data, &r); err != nil {
		return Row{}, fmt.Errorf("%s is not a gremlins result: %w", resultFile, err)
	}
	accepted, err := readSurvivors(survivorsFile)
	if err != nil {
		return Row{}, err
	}
	row := Row{Package: pkg}
	for _, f := range r.Files {
		file := path.Join(pkg, f.Name)
		var src []string
		for _, m := range f.Mutations {
			switch m.Status {
			case "KILLED":
				row.Killed++
			case "LIVED":
				row.Lived++
				if src == nil {
					if src, err = lines(file); err != nil {
						return Row{}, err
					}
				}
				text := ""
				if m.Line >= 1 && m.Line <= len(src) {
					text = strings.TrimSpace(src[m.Line-1])
				}
				s := Survivor{File: file, Line: m.Line, Column: m.Column, Mutator: m.Type, Source: text}
				s.Reason = s.reasonIn(accepted)
				row.Survivors = append(row.Survivors, s)
			case "NOT COVERED":
				row.NotCovered++
			case "TIMED OUT":
				row.TimedOut++
			default:
				row.NotViable++ // not viable (does not compile), skipped
			}
		}
	}
	sortSurvivors(row.Survivors)
	row.Score = score(row.Killed, row.Lived)
	return row, nil
}

// reasonIn is the reason the survivors file (accepted) gives for s, "" when it lists none. A line with two
// mutants of one kind names the one it accepts by its column.
func (s Survivor) reasonIn(accepted map[string]string) string {
	if r := accepted[fmt.Sprintf("%s %s:%d `%s`", s.File, s.Mutator, s.Column, s.Source)]; r != "" {
		return r
	}
	return accepted[fmt.Sprintf("%s %s `%s`", s.File, s.Mutator, s.Source)]
}

// fillReasons gives the survivors of every row (and part) that have no reason the one the survivors file
// lists now: survivors reasoned after their measurement reach the table without measuring again. It
// reports whether it changed anything.
func fillReasons(s *Scores, accepted map[string]string) bool {
	changed := false
	fill := func(vs []Survivor) {
		for i := range vs {
			if vs[i].Reason == "" {
				if r := vs[i].reasonIn(accepted); r != "" {
					vs[i].Reason, changed = r, true
				}
			}
		}
	}
	for i := range s.Packages {
		fill(s.Packages[i].Survivors)
		for j := range s.Packages[i].Parts {
			fill(s.Packages[i].Parts[j].Survivors)
		}
	}
	return changed
}

// sortSurvivors orders survivors by file, line, column and mutator.
func sortSurvivors(vs []Survivor) {
	slices.SortFunc(vs, func(a, b Survivor) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), cmp.Compare(a.Mutator, b.Mutator))
	})
}

// score is 100 * killed / (killed + lived) to one decimal, 100 when no mutant ran to the end.
func score(killed, lived int) float64 {
	if killed+lived == 0 {
		return 100
	}
	return float64(int(1000*float64(killed)/float64(killed+lived)+0.5)) / 10
}

// Line is the line mutate.sh prints for the package.
func (r Row) Line() string {
	listed := 0
	for _, s := range r.Survivors {
		if s.Reason != "" {
			listed++
		}
	}
	return fmt.Sprintf("%-26s %5.1f%%  killed %d, lived %d (%d listed as harmless), timed out %d, not covered %d, not viable %d",
		r.Package, r.Score, r.Killed, r.Lived, listed, r.TimedOut, r.NotCovered, r.NotViable)
}

// record puts row in the scores file in place of the package's previous row. With all (the package's
// whole file list) row is a part: it joins the previous row's parts measured at the same tree on other
// files, and the package's row sums them.
func record(file string, row Row, all []string) error {
	s, err := readScores(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(all) > 0 {
		var prev *Row
		if i := slices.IndexFunc(s.Packages, func(r Row) bool { return r.Package == row.Package }); i >= 0 {
			prev = &s.Packages[i]
		}
		row = joinParts(prev, row, all)
	}
	s.Packages = slices.DeleteFunc(s.Packages, func(r Row) bool { return r.Package == row.Package })
	s.Packages = append(s.Packages, row)
	slices.SortFunc(s.Packages, func(a, b Row) int { return cmp.Compare(a.Package, b.Package) })
	return writeScores(file, s)
}

// writeScores writes the scores file.
func writeScores(file string, s Scores) error {
	var data bytes.Buffer
	enc := json.NewEncoder(&data)
	enc.SetEscapeHTML(false) // reasons and source lines read as written: <, >, &
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	return os.WriteFile(file, data.Bytes(), 0o644)
}

// joinParts returns the package's row once part is measured: prev's parts at part's tree that measured
// other files are kept (a part measured on a dirty tree, or at another tree, describes other code and is
// dropped), and the row sums them, listing in Partial the files of all still unmeasured.
func joinParts(prev *Row, part Row, all []string) Row {
	var parts []Row
	if prev != nil && part.Tree != "" {
		for _, p := range prev.Parts {
			if p.Tree == part.Tree && !slices.ContainsFunc(p.Files, func(f string) bool { return slices.Contains(part.Files, f) }) {
				parts = append(parts, p)
			}
		}
	}
	parts = append(parts, part)
	slices.SortFunc(parts, func(a, b Row) int { return cmp.Compare(strings.Join(a.Files, " "), strings.Join(b.Files, " ")) })
	row := Row{Package: part.Package, Tree: part.Tree, Parts: parts}
	var commits, dates []string
	for _, p := range parts {
		row.Files = append(row.Files, p.Files...)
		row.Killed += p.Killed
		row.Lived += p.Lived
		row.TimedOut += p.TimedOut
		row.NotCovered += p.NotCovered
		row.NotViable += p.NotViable
		row.Survivors = append(row.Survivors, p.Survivors...)
		if !slices.Contains(commits, p.Commit) {
			commits = append(commits, p.Commit)
		}
		dates = append(dates, p.Date)
	}
	sortSurvivors(row.Survivors)
	for _, f := range all {
		if !slices.Contains(row.Files, f) {
			row.Partial = append(row.Partial, f)
		}
	}
	row.Files = orderLike(row.Files, all)
	row.Score = score(row.Killed, row.Lived)
	row.Commit, row.Date = strings.Join(commits, "+"), slices.Max(dates)
	return row
}

// orderLike sorts files in the order of all (files outside it last).
func orderLike(files, all []string) []string {
	out := slices.Clone(files)
	slices.SortStableFunc(out, func(a, b string) int {
		ia, ib := slices.Index(all, a), slices.Index(all, b)
		if ia < 0 {
			ia = len(all)
		}
		if ib < 0 {
			ib = len(all)
		}
		return cmp.Compare(ia, ib)
	})
	return out
}

func readScores(file string) (Scores, error) {
	var s Scores
	data, err := os.ReadFile(file)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// Markers delimit the generated table in the README.
const (
	BeginMarker = "<!-- mutate:begin (make mutate writes this table from e2e/tools/mutate-scores.json) -->"
	EndMarker   = "<!-- mutate:end -->"
)

// Table renders the scores as the README shows them: a table, then each package's survivors and reasons.
func Table(s Scores) string {
	var b strings.Builder
	b.WriteString("| package | files | score | killed | lived | timed out | not covered | measured at |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range s.Packages {
		at := fmt.Sprintf("%s (%s)", r.Commit, r.Date)
		if r.Note != "" {
			at += "*"
		}
		if len(r.Parts) > 1 {
			at += " (in parts, package unchanged between them)"
		}
		files := strings.Join(r.Files, ", ")
		if len(r.Partial) > 0 {
			files += " (partial: not yet " + strings.Join(r.Partial, ", ") + ")"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %.1f%% | %d | %d | %d | %d | %s |\n", r.Package, files,
			r.Score, r.Killed, r.Lived, r.TimedOut, r.NotCovered, at)
	}
	var notes, survivors strings.Builder
	for _, r := range s.Packages {
		if r.Note != "" {
			fmt.Fprintf(&notes, "- `%s`: %s\n", r.Package, r.Note)
		}
		// One line per reason: mutants of one condition usually share theirs.
		var reasons []string
		count := map[string][]string{}
		for _, v := range r.Survivors {
			reason := v.Reason
			if reason == "" {
				reason = "**not listed in e2e/tools/mutate-survivors.txt**"
			}
			if count[reason] == nil {
				reasons = append(reasons, reason)
			}
			count[reason] = append(count[reason], fmt.Sprintf("%s:%d %s", path.Base(v.File), v.Line, v.Mutator))
		}
		for _, reason := range reasons {
			fmt.Fprintf(&survivors, "- `%s` %s: %s\n", r.Package, strings.Join(count[reason], ", "), reason)
		}
	}
	if notes.Len() > 0 {
		b.WriteString("\n\\* Carried over from the README's earlier hand-written table, at the commit that wrote each figure; not\nmeasured by `make mutate` since. What that table said:\n\n")
		b.WriteString(notes.String())
	}
	if survivors.Len() > 0 {
		b.WriteString("\nSurvivors (lived mutants, file:line at the commit measured) and why each is harmless:\n\n")
		b.WriteString(survivors.String())
	}
	return b.String()
}

// Splice replaces the text between the markers in doc by table.
func Splice(doc []byte, table string) ([]byte, error) {
	return docsection.Splice(doc, BeginMarker, EndMarker, table)
}

// readSurvivors returns the accepted survivors, each with its reason.
func readSurvivors(file string) (map[string]string, error) {
	out := map[string]string{}
	if file == "" {
		return out, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		key, reason, ok := strings.Cut(l, " -- ")
		if !ok || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: a survivor needs a reason after \" -- \"", file, n)
		}
		out[strings.TrimSpace(key)] = strings.TrimSpace(reason)
	}
	return out, sc.Err()
}

func lines(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return strings.Split(string(data), "\n"), nil
}
