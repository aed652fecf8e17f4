// Package memtrim gives back the pages of the lvms binary that start-up touched and idle work does not
// need, and the free pages of the heap. lvms is one binary for every role, so starting the node agent runs the initialisation of every
// package in it and faults in tens of MiB of code and read-only data that the agent never touches again;
// they stay resident (and count in the container's memory) until the kernel is short of memory. Asking
// the kernel to page out the binary's read-only mappings (MADV_PAGEOUT) leaves what the agent really uses,
// which faults back in from the page cache or the image on first touch.
//
// MADV_PAGEOUT is a reclaim hint: clean file pages are dropped, anything else is treated as the kernel
// treats memory pressure, so no content can be lost. Kernels older than 5.4 refuse it; nothing happens then.
//
// MADV_PAGEOUT leaves a page that another process maps too: on MicroShift the operator and the node agent
// run from one image, so most of the binary stays resident in both, counted in full in each one's RSS. So
// PageOut then unmaps the same read-only mappings from this process (MADV_DONTNEED): the pages stay in
// the page cache for whoever maps them, and fault back in from it when this process touches them again.
// For a private file mapping that is exact only while the process never wrote to it, so a mapping with any
// anonymous (copied-on-write) page is left mapped.
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
	// Anonymous is the mapping's copied-on-write part in kB (smaps' Anonymous; 0 from a maps text).
	Anonymous int64
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

// SmapsRegions are the read-only, private mappings of the file exe in a /proc/<pid>/smaps text, each with
// its Anonymous size.
func SmapsRegions(smaps, exe string) ([]Region, error) {
	var out []Region
	var cur *Region
	sc := bufio.NewScanner(strings.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Anonymous:"); ok {
			if cur != nil {
				f := strings.Fields(v)
				if len(f) != 2 {
					return nil, fmt.Errorf("smaps: bad Anonymous line %q", line)
				}
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					return nil, fmt.Errorf("smaps: bad Anonymous line %q", line)
				}
				cur.Anonymous = n
			}
			continue
		}
		if f := strings.Fields(line); len(f) < 5 || !strings.Contains(f[0], "-") || strings.HasSuffix(f[0], ":") {
			continue // a field line of the mapping above
		}
		cur = nil
		r, err := Regions(line+"\n", exe)
		if err != nil {
			return nil, err
		}
		if len(r) == 1 {
			out = append(out, r[0])
			cur = &out[len(out)-1]
		}
	}
	return out, sc.Err()
}

// PageOut asks the kernel to page out this process's read-only mappings of its own binary, then unmaps
// the pages of them another process keeps resident (see the package comment), and returns how many bytes
// of mappings it covered.
func PageOut() (uint64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	regions, err := SmapsRegions(string(smaps), exe)
	if err != nil {
		return 0, err
	}
	var covered uint64
	for _, r := range regions {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(r.Start), uintptr(r.End-r.Start), unix.MADV_PAGEOUT); errno != 0 {
			return covered, fmt.Errorf("madvise(MADV_PAGEOUT) %x-%x: %w", r.Start, r.End, errno)
		}
		if r.Anonymous == 0 {
			if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(r.Start), uintptr(r.End-r.Start), unix.MADV_DONTNEED); errno != 0 {
				return covered, fmt.Errorf("madvise(MADV_DONTNEED) %x-%x: %w", r.Start, r.End, errno)
			}
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
