// Package hostinfo reads what a measured figure says about its machine from /proc: the CPU model and the
// memory, for the records of make bench and make test.
package hostinfo

import (
	"os"
	"strconv"
	"strings"
)

// CPU is the first "model name" of /proc/cpuinfo, or "" when it cannot be read.
func CPU() string { return cpu(readFile("/proc/cpuinfo")) }

// MemoryGiB is MemTotal of /proc/meminfo in GiB, rounded to the nearest, or 0 when it cannot be read.
func MemoryGiB() int { return memoryGiB(readFile("/proc/meminfo")) }

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func cpu(cpuinfo string) string {
	for line := range strings.Lines(cpuinfo) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memoryGiB(meminfo string) int {
	for line := range strings.Lines(meminfo) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kib, _ := strconv.Atoi(f[1])
			return (kib + 1<<19) >> 20
		}
	}
	return 0
}
