package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSSKiB is a process's resident set size in KiB (VmRSS in /proc/<pid>/status); pid 0 is this process.
func RSSKiB(pid int) (int64, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in %s", path)
}
