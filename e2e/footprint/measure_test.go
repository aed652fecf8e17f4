package footprint

import (
	"os"
	"strings"
	"testing"
)

// Recorded on this machine (kernel 6.18): /proc/self/smaps_rollup of cat.
const smapsRollup = `562177b16000-7ffdea41e000 ---p 00000000 00:00 0                          [rollup]
Rss:                1764 kB
Pss:                 299 kB
Pss_Dirty:           112 kB
Pss_Anon:            112 kB
Pss_File:            187 kB
Shared_Clean:       1612 kB
Private_Dirty:       112 kB
Anonymous:           112 kB
Swap:                  0 kB
`

func TestParseSmapsRollup(t *testing.T) {
	m, err := ParseSmapsRollup(smapsRollup)
	if err != nil {
		t.Fatal(err)
	}
	if m != (Memory{PSS: 299, RSS: 1764, Anon: 112}) {
		t.Errorf("got %+v, want PSS 299, RSS 1764, Anon 112 kB", m)
	}
	for name, text := range map[string]string{
		"no Pss line":   strings.Replace(smapsRollup, "Pss:  ", "Xss:  ", 1),
		"not in kB":     strings.Replace(smapsRollup, "299 kB", "299 MB", 1),
		"not a number":  strings.Replace(smapsRollup, "1764 kB", "17x4 kB", 1),
		"negative size": strings.Replace(smapsRollup, "112 kB\nSwap", "-112 kB\nSwap", 1),
		"empty":         "",
	} {
		if _, err := ParseSmapsRollup(text); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseCPU(t *testing.T) {
	// Recorded: /proc/PID/stat of cat, with utime 7, stime 3, cutime 20, cstime 10 put in; the command name
	// holds a space and a parenthesis, as a process may name itself.
	stat := "9400 (my (cat)) R 9397 9397 1227 0 -1 4194304 98 0 0 0 7 3 20 10 20 0 1 0 83445 3133440 408 18446744073709551615"
	got, err := ParseCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 0.4 {
		t.Errorf("got %v s, want 0.4 (40 ticks of 1/100 s: own and waited-for children's time)", got)
	}
	for _, bad := range []string{"", "9400 cat R 1 2", "9400 (cat) R 9397 9397", "9400 (cat) R 9397 9397 1227 0 -1 4194304 98 0 0 0 x 3 20 10 20"} {
		if _, err := ParseCPU(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestWorkingSet(t *testing.T) {
	stat := "cache 8192\ninactive_file 376832\ntotal_cache 10485760\ntotal_inactive_file 4194304\n"
	got, err := WorkingSet("12582912\n", stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 8192 {
		t.Errorf("got %d KiB, want 8192 (12 MiB used, 4 MiB of it inactive page cache)", got)
	}
	if got, _ := WorkingSet("1024", stat); got != 0 {
		t.Errorf("more inactive cache than usage: got %d, want 0", got)
	}
	if _, err := WorkingSet("12582912", "cache 8192\n"); err == nil {
		t.Error("no total_inactive_file: no error")
	}
	if _, err := WorkingSet("many", stat); err == nil {
		t.Error("usage not a number: no error")
	}
}

func TestSummarize(t *testing.T) {
	if s := Summarize([]float64{5, 1, 9, 3}); s != (Summary{Median: 4, Max: 9}) {
		t.Errorf("even count: %+v, want median 4 (between 3 and 5), max 9", s)
	}
	in := []float64{7, 2, 30}
	if s := Summarize(in); s != (Summary{Median: 7, Max: 30}) {
		t.Errorf("odd count: %+v, want median 7, max 30", s)
	}
	if in[0] != 7 || in[1] != 2 {
		t.Error("Summarize reordered its input")
	}
	if s := Summarize(nil); s != (Summary{}) {
		t.Errorf("no readings: %+v", s)
	}
}

func TestParseAcct_Recorded(t *testing.T) {
	// Recorded on this machine: process accounting while a Go program (pid 17247) ran `sh -c "true;
	// /bin/true"`: the program's forked child before its exec (17251), sh (17252), the second true, which
	// sh forked (17254), and the program itself.
	b, err := os.ReadFile("testdata/pacct")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ParseAcct(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Exited{{17251, 17247, "rec"}, {17254, 17252, "true"}, {17252, 17247, "sh"}, {17247, 17217, "rec"}}
	if len(recs) != len(want) {
		t.Fatalf("got %d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i := range want {
		if recs[i] != want[i] {
			t.Errorf("record %d: got %+v, want %+v", i, recs[i], want[i])
		}
	}
	// Every process under the program counts, grandchildren through their parents' records; the program
	// itself does not count as its own.
	if got := Descendants(recs, []int{17247}); got[17247] != 3 {
		t.Errorf("descendants of 17247: %d, want 3", got[17247])
	}
	if got := Descendants(recs, []int{17252}); got[17252] != 1 {
		t.Errorf("descendants of sh: %d, want 1 (true)", got[17252])
	}
	if got := Descendants(recs, []int{1}); got[1] != 0 {
		t.Errorf("a root none of them descends from: %d", got[1])
	}
	if _, err := ParseAcct(b[:100]); err == nil {
		t.Error("a torn record: no error")
	}
	bad := append([]byte(nil), b[:64]...)
	bad[1] = 2
	if _, err := ParseAcct(bad); err == nil {
		t.Error("a version 2 record: no error")
	}
}

func TestDescendants_CycleEnds(t *testing.T) {
	// PIDs are reused: records can make a loop; counting must still end.
	recs := []Exited{{PID: 10, PPID: 11}, {PID: 11, PPID: 10}, {PID: 12, PPID: 5}}
	if got := Descendants(recs, []int{5}); got[5] != 1 {
		t.Errorf("got %d, want 1", got[5])
	}
}
