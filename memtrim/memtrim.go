// Package memtrim gives back the pages of the lvms binary that start-up touched and idle work does not
// need, and the free pages of the heap. lvms is one binary for every role, so starting the node agent runs the initialisation of every
// package in it and faults in tens of MiB of code and read-only data that the agent never touches again;
// they stay resident (and count in the container's memory) until the kernel is short of memory. Asking
// the kernel to page out the binary's read-only mappings (MADV_PAGEOUT) leaves what the agent really uses,
// which faults back in from the page cache or the image on first touch.
//
// MADV_PAGEOUT is a reclaim hint: clean file pages are dropped, anything else is treated as the kernel
// treats memory pressure, so no content can be lost. Kernels older than 5.4 refuse it; nothing happens then.
package memtrim

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

// Region is one mapping of the binary.
type Region struct {
	Start, End uint64
	Perms      string
}

// Regions are the read-only, private mappings of the file exe in a /proc/<pid>/maps text.
func Regions(maps, exe string) ([]Region, error) {
	var out []Region
	sc := bufio.NewScanner(strings.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.Join(f[5:], " ") != exe {
			continue
		}
		perms := f[1]
		if len(perms) != 4 || perms[1] != '-' || perms[3] != 'p' {
			continue // writable or shared: not ours to drop
		}
		from, to, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps: bad address range %q", f[0])
		}
		start, err1 := strconv.ParseUint(from, 16, 64)
		end, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("maps: bad address range %q", f[0])
		}
		out = append(out, Region{Start: start, End: end, Perms: perms})
	}
	return out, sc.Err()
}

// PageOut asks the kernel to page out this process's read-only mappings of its own binary and returns
// how many bytes of mappings it covered.
func PageOut() (uint64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	regions, err := Regions(string(maps), exe)
	if err != nil {
		return 0, err
	}
	var covered uint64
	for _, r := range regions {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(r.Start), uintptr(r.End-r.Start), unix.MADV_PAGEOUT); errno != 0 {
			return covered, fmt.Errorf("madvise(MADV_PAGEOUT) %x-%x: %w", r.Start, r.End, errno)
		}
		covered += r.End - r.Start
	}
	return covered, nil
}

// pageOut and freeHeap are replaced in tests.
var (
	pageOut  = PageOut
	freeHeap = debug.FreeOSMemory
)

// Run trims the process after delay, once start-up is over, and then every interval, until ctx ends: it
// returns the heap's free pages to the kernel (a garbage collection first: a burst of work leaves the heap
// grown to GOGC's goal, and the runtime gives it back only slowly) and pages the binary out (idle work
// touches little; what start-up or a rare path faulted in goes again). A page-out that fails (a kernel
// without MADV_PAGEOUT) goes to report once and is not tried again.
func Run(ctx context.Context, clk clock.WithTicker, delay, interval time.Duration, report func(error)) {
	t := clk.NewTimer(delay)
	defer t.Stop()
	paging := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		freeHeap()
		if paging {
			if _, err := pageOut(); err != nil {
				report(err)
				paging = false
			}
		}
		t.Reset(interval)
	}
}
