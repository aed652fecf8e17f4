package testenv

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// RSSKiB is a process's resident set size in KiB (VmRSS in /proc/<pid>/status); pid 0 is this process.
func RSSKiB(pid int) (int64, error) { return statusKiB(pid, "VmRSS:") }

// AnonKiB is the anonymous part of a process's resident memory in KiB (heap, stacks, runtime data); the
// rest of its RSS is file pages, mostly the binary's code and read-only data.
func AnonKiB(pid int) (int64, error) { return procKiB(pid, "smaps_rollup", "Anonymous:") }

func statusKiB(pid int, field string) (int64, error) { return procKiB(pid, "status", field) }

func procKiB(pid int, file, field string) (int64, error) {
	path := "/proc/self/" + file
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/%s", pid, file)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", strings.TrimSuffix(field, ":"), path)
}

// CPUSeconds is the CPU time a process has used so far, user and system (/proc/<pid>/stat, in clock
// ticks of 1/100 s, Linux's USER_HZ).
func CPUSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data)[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return (utime + stime) / 100, nil
}

// ChildPIDs lists the processes this process started whose command name (/proc/<pid>/comm, at most 15
// bytes) is one of names: the test control plane's kube-apiserver and etcd, for example.
func ChildPIDs(names ...string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone meanwhile
		}
		open, end := strings.IndexByte(string(data), '('), strings.LastIndexByte(string(data), ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(data)[end+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(self) || !slices.Contains(names, string(data)[open+1:end]) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
