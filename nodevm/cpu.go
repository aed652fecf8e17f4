package nodevm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// procCPU is one process's CPU time: its own and its waited-for children's (an lvm command the agent ran
// counts in the agent's).
type procCPU struct {
	comm string
	cpu  time.Duration
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times (100 on every Linux architecture Go runs on).
const clockTick = 100

// parseStat reads the command name and the CPU time (utime, stime, cutime, cstime) of a /proc/<pid>/stat
// line. The name is in parentheses and may itself hold spaces and parentheses: the last ')' ends it.
func parseStat(line string) (procCPU, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procCPU{}, fmt.Errorf("no (command) in %q", line)
	}
	f := strings.Fields(line[end+1:])
	// After the name: state, ppid, pgrp, session, tty, tpgid, flags, minflt, cminflt, majflt, cmajflt, then
	// utime (index 11 here), stime, cutime, cstime.
	if len(f) < 15 {
		return procCPU{}, fmt.Errorf("%d fields after the command in %q, want at least 15", len(f), line)
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return procCPU{}, fmt.Errorf("CPU time %q in %q", s, line)
		}
		ticks += n
	}
	return procCPU{comm: line[open+1 : end], cpu: time.Duration(ticks) * time.Second / clockTick}, nil
}

// subcommand is " <first argument>" of a process whose first argument names what it does (lvms operator,
// lvms nodeagent), so that one binary's parts are told apart; "" otherwise.
func subcommand(comm, dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(argv) < 2 || filepath.Base(argv[0]) != comm || argv[1] == "" || strings.HasPrefix(argv[1], "-") {
		return ""
	}
	return " " + argv[1]
}

// cpuReport sums the CPU time of the processes under proc by command name and names the top n, busiest
// first: where a node's CPU went, which under emulation is the tier's cost (the host sees only qemu).
func cpuReport(proc string, n int) string {
	dirs, _ := filepath.Glob(filepath.Join(proc, "[0-9]*"))
	by := map[string]time.Duration{}
	var total time.Duration
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue // gone since the glob
		}
		p, err := parseStat(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		by[p.comm+subcommand(p.comm, d)] += p.cpu
		total += p.cpu
	}
	procs := make([]procCPU, 0, len(by))
	for c, d := range by {
		procs = append(procs, procCPU{c, d})
	}
	slices.SortFunc(procs, func(a, b procCPU) int {
		if a.cpu != b.cpu {
			return int(b.cpu - a.cpu)
		}
		return strings.Compare(a.comm, b.comm)
	})
	var parts []string
	for _, p := range procs[:min(n, len(procs))] {
		parts = append(parts, fmt.Sprintf("%s %s", p.comm, p.cpu.Round(100*time.Millisecond)))
	}
	return fmt.Sprintf("CPU of the running processes %s in all: %s", total.Round(100*time.Millisecond), strings.Join(parts, ", "))
}
