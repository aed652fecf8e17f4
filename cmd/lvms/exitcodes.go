package main

import (
	"fmt"
	"slices"
	"strings"
)

// exitCodes are every lvms command's exit codes besides 0 and 1: the README's table is rendered from them
// (TestExitCodes_READMETableIsCurrent) and each command's --help lists its own.
var exitCodes = []struct {
	command string // command path without "lvms "
	code    int
	means   string
}{
	{"analyze", exitFound, "with --fail-on: a finding at or above that severity (the findings are printed)"},
	{"migrate plan", exitLossy, "the plan is lossy: some v1 setting behaves differently in v2 (-o yaml and -o json then print no objects, only the findings on stderr; with --accept-lossy the plan is printed and the code is 0)"},
	{"migrate preflight", exitFound, "a check failed (each is printed with its reason and fix)"},
	{"migrate apply", exitLossy, "the plan is lossy and --accept-lossy was not given"},
	{"migrate verify", exitFound, "differences between before and after (each listed)"},
}

// commonExitCodes are every command's.
var commonExitCodes = []string{"0 success", "1 an error (the message says what went wrong and what to do)"}

// exitCodesHelp is the "Exit codes:" paragraph of command path's --help.
func exitCodesHelp(path string) string {
	lines := slices.Clone(commonExitCodes)
	for _, e := range exitCodes {
		if e.command == path {
			lines = append(lines, fmt.Sprintf("%d %s", e.code, e.means))
		}
	}
	return "\n\nExit codes:\n  " + strings.Join(lines, "\n  ")
}

// The README's table is between these markers.
const (
	exitCodesBegin = "<!-- exitcodes:begin (generated from cmd/lvms/exitcodes.go; TestExitCodes_READMETableIsCurrent checks it) -->"
	exitCodesEnd   = "<!-- exitcodes:end -->"
)

// exitCodesTable is the README's table.
func exitCodesTable() string {
	var b strings.Builder
	b.WriteString("| command | exit code | means |\n|---|---|---|\n")
	for _, c := range commonExitCodes {
		code, means, _ := strings.Cut(c, " ")
		fmt.Fprintf(&b, "| every command | `%s` | %s |\n", code, means)
	}
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "| `lvms %s` | `%d` | %s |\n", e.command, e.code, e.means)
	}
	return b.String()
}
