// Command mutatereport reads the JSON result of a gremlins run over one package (see e2e/tools/mutate.sh),
// prints the package's mutation score, and fails when a mutant lived that the survivors file does not
// list with a reason.
//
// A survivors line is "<package>/<file> <MUTATOR> `<source line>` -- <why no test can or should kill it>";
// it names the source line by its text, not its number, so it stays valid when lines move.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path"
	"strings"
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

func main() {
	pkg := flag.String("pkg", "", "the package the result is for, e.g. operator/usage")
	survivorsFile := flag.String("survivors", "", "file listing the accepted survivors")
	flag.Parse()
	if flag.NArg() != 1 || *pkg == "" {
		fmt.Fprintln(os.Stderr, "usage: mutatereport -pkg <package> [-survivors file] <gremlins.json>")
		os.Exit(2)
	}
	line, unlisted, err := report(*pkg, *survivorsFile, flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutatereport:", err)
		os.Exit(1)
	}
	for _, u := range unlisted {
		fmt.Fprintf(os.Stderr, "  lived, not in %s: %s\n", *survivorsFile, u)
	}
	fmt.Println(line)
	if len(unlisted) > 0 {
		os.Exit(1)
	}
}

// report returns the package's score line and the lived mutants the survivors file does not accept, each as
// a ready-to-paste survivors line without its reason.
func report(pkg, survivorsFile, resultFile string) (string, []string, error) {
	data, err := os.ReadFile(resultFile)
	if err != nil {
		return "", nil, err
	}
	var r result
	if err := json.Unmarshal(data, &r); err != nil {
		return "", nil, fmt.Errorf("%s is not a gremlins result: %w", resultFile, err)
	}
	accepted, err := readSurvivors(survivorsFile)
	if err != nil {
		return "", nil, err
	}
	var killed, lived, uncovered, other int
	var unlisted []string
	for _, f := range r.Files {
		file := path.Join(pkg, f.Name)
		var src []string
		for _, m := range f.Mutations {
			switch m.Status {
			case "KILLED":
				killed++
			case "LIVED":
				lived++
				if src == nil {
					if src, err = lines(file); err != nil {
						return "", nil, err
					}
				}
				text := ""
				if m.Line >= 1 && m.Line <= len(src) {
					text = strings.TrimSpace(src[m.Line-1])
				}
				key := fmt.Sprintf("%s %s `%s`", file, m.Type, text)
				if !accepted[key] {
					unlisted = append(unlisted, fmt.Sprintf("%s -- (line %d:%d) why is it harmless?", key, m.Line, m.Column))
				}
			case "NOT COVERED":
				uncovered++
			default:
				other++ // timed out, not viable, skipped
			}
		}
	}
	score := 100.0
	if killed+lived > 0 {
		score = 100 * float64(killed) / float64(killed+lived)
	}
	return fmt.Sprintf("%-24s %5.1f%%  killed %d, lived %d (%d listed as harmless), not covered %d, other %d",
		pkg, score, killed, lived, lived-len(unlisted), uncovered, other), unlisted, nil
}

func readSurvivors(file string) (map[string]bool, error) {
	out := map[string]bool{}
	if file == "" {
		return out, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		key, reason, ok := strings.Cut(l, " -- ")
		if !ok || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: a survivor needs a reason after \" -- \"", file, n)
		}
		out[strings.TrimSpace(key)] = true
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
