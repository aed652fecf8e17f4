package footprint

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Memory is one reading of a process's memory, in KiB, from /proc/PID/smaps_rollup.
type Memory struct {
	// PSS is the proportional set size: each page shared with other processes counts a share. Summed
	// over a node's processes it counts every page once, so it is the node's total.
	PSS int64
	// RSS counts every resident page in full, shared or not.
	RSS int64
	// Anon is the anonymous part (heap, stacks): what no other process can share.
	Anon int64
}

// ParseSmapsRollup reads the Pss, Rss and Anonymous lines of an smaps_rollup text.
func ParseSmapsRollup(text string) (Memory, error) {
	var m Memory
	seen := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var into *int64
		switch key {
		case "Pss":
			into = &m.PSS
		case "Rss":
			into = &m.RSS
		case "Anonymous":
			into = &m.Anon
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return Memory{}, fmt.Errorf("smaps_rollup: %s: want \"<number> kB\", got %q", key, strings.TrimSpace(rest))
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || v < 0 {
			return Memory{}, fmt.Errorf("smaps_rollup: %s: %q is not a size in kB", key, f[0])
		}
		*into = v
		seen++
	}
	if seen != 3 {
		return Memory{}, fmt.Errorf("smaps_rollup: want Rss, Pss and Anonymous lines, found %d of them", seen)
	}
	return m, sc.Err()
}

// ReadMemory reads pid's memory.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return Memory{}, err
	}
	return ParseSmapsRollup(string(b))
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on every Linux architecture Go runs on).
const clockTicks = 100

// ParseCPU is the CPU seconds of a /proc/PID/stat line: the process's own user and system time and that of
// the children it waited for (the lvm commands it ran, and theirs).
func ParseCPU(stat string) (float64, error) {
	// The command name is in parentheses and may hold spaces; the fields after it are numbered from 3.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// utime, stime, cutime, cstime are fields 14-17, that is f[11:15].
	if len(f) < 15 {
		return 0, fmt.Errorf("stat: %d fields after the command name, want at least 15", len(f))
	}
	var ticks int64
	for _, s := range f[11:15] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("stat: %q is not a tick count", s)
		}
		ticks += v
	}
	return float64(ticks) / clockTicks, nil
}

// ReadCPU reads pid's CPU seconds.
func ReadCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseCPU(string(b))
}

// WorkingSet is a cgroup's working set as kubelet and metrics-server report a container's on cgroup v1:
// memory.usage_in_bytes less total_inactive_file of memory.stat (page cache the kernel would reclaim
// first), in KiB; never below zero.
func WorkingSet(usage string, stat string) (int64, error) {
	u, err := strconv.ParseInt(strings.TrimSpace(usage), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memory.usage_in_bytes: %q is not a number", strings.TrimSpace(usage))
	}
	inactive := int64(-1)
	for line := range strings.SplitSeq(stat, "\n") {
		if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
			if inactive, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
				return 0, fmt.Errorf("memory.stat: total_inactive_file %q is not a number", v)
			}
		}
	}
	if inactive < 0 {
		return 0, fmt.Errorf("memory.stat: no total_inactive_file line")
	}
	return max(u-inactive, 0) / 1024, nil
}

// Cgroup is a cgroup v1 memory and cpuacct group of its own for one pod's processes, as kubelet gives a
// pod: its children (lvm commands) are charged to it too.
type Cgroup struct{ memory, cpuacct string }

// cgroupRoot is where cgroup v1's hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// NewCgroup makes the group name (a path under each hierarchy).
func NewCgroup(name string) (*Cgroup, error) {
	g := &Cgroup{memory: filepath.Join(cgroupRoot, "memory", name), cpuacct: filepath.Join(cgroupRoot, "cpuacct", name)}
	for _, d := range []string{g.memory, g.cpuacct} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v1 %s: %w (the footprint benchmark needs cgroup v1's memory and cpuacct hierarchies)", d, err)
		}
	}
	return g, nil
}

// Add moves pid into the group.
func (g *Cgroup) Add(pid int) error {
	for _, d := range []string{g.memory, g.cpuacct} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move %d into %s: %w", pid, d, err)
		}
	}
	return nil
}

// WorkingSet reads the group's working set in KiB.
func (g *Cgroup) WorkingSet() (int64, error) {
	usage, err := os.ReadFile(filepath.Join(g.memory, "memory.usage_in_bytes"))
	if err != nil {
		return 0, err
	}
	stat, err := os.ReadFile(filepath.Join(g.memory, "memory.stat"))
	if err != nil {
		return 0, err
	}
	return WorkingSet(string(usage), string(stat))
}

// CPU reads the group's CPU seconds (every process that ever ran in it, exited ones included).
func (g *Cgroup) CPU() (float64, error) {
	b, err := os.ReadFile(filepath.Join(g.cpuacct, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpuacct.usage: %q is not a number", strings.TrimSpace(string(b)))
	}
	return float64(ns) / 1e9, nil
}

// Remove removes the group once its processes are gone (a group with processes cannot be removed; the
// ones left are moved to the root group first).
func (g *Cgroup) Remove() error {
	var errs []string
	for _, d := range []string{g.memory, g.cpuacct} {
		if procs, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
			root := filepath.Join(filepath.Dir(d), "cgroup.procs")
			for p := range strings.FieldsSeq(string(procs)) {
				_ = os.WriteFile(root, []byte(p), 0o644)
			}
		}
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err.Error())
		}
	}
	if errs != nil {
		return fmt.Errorf("remove cgroup: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Summary is the median and the maximum of a series of readings.
type Summary struct{ Median, Max float64 }

// Summarize returns the median and the maximum of v (zero for none).
func Summarize(v []float64) Summary {
	if len(v) == 0 {
		return Summary{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Summary{Median: m, Max: s[len(s)-1]}
}
