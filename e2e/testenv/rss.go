package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSSKiB is a process's resident set size in KiB (VmRSS in /proc/<pid>/status); pid 0 is this process.
func RSSKiB(pid int) (int64, error) { return statusKiB(pid, "VmRSS:") }

// PeakRSSKiB is a process's peak resident set size in KiB since it started or since ResetPeakRSS (VmHWM).
func PeakRSSKiB(pid int) (int64, error) { return statusKiB(pid, "VmHWM:") }

// ResetPeakRSS starts this process's peak resident set size afresh (Linux's clear_refs 5).
func ResetPeakRSS() error { return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

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
