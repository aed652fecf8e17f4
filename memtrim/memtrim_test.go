package memtrim_test

import (
	"os"
	"testing"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/memtrim"
)

const maps = `00400000-01a5c000 r-xp 00000000 fe:00 1234                               /usr/bin/lvms
01a5c000-03b3e000 r--p 0165c000 fe:00 1234                               /usr/bin/lvms
03b3e000-03b9f000 rw-p 0373e000 fe:00 1234                               /usr/bin/lvms
03b9f000-03c00000 rw-p 00000000 00:00 0
c000000000-c004000000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--s 00000000 fe:00 99                         /usr/bin/lvms
7f0000001000-7f0000002000 r--p 00000000 fe:00 77                         /usr/bin/lvms-other
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
`

func TestRegions(t *testing.T) {
	got, err := memtrim.Regions(maps, "/usr/bin/lvms")
	if err != nil {
		t.Fatal(err)
	}
	want := []memtrim.Region{{Start: 0x400000, End: 0x1a5c000, Perms: "r-xp"}, {Start: 0x1a5c000, End: 0x3b3e000, Perms: "r--p"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("regions = %+v, want the binary's read-only private mappings only (not its data, a shared mapping or another file): %+v", got, want)
	}
	if _, err := memtrim.Regions("zz-01 r--p 0 fe:00 1 /usr/bin/lvms\n", "/usr/bin/lvms"); err == nil {
		t.Error("a bad address range is not an error")
	}
	if got, _ := memtrim.Regions("00400000-01a5c000 r-xp 00000000 fe:00 1234 /opt/my lvms\n", "/opt/my lvms"); len(got) != 1 {
		t.Errorf("a path with a space: %+v", got)
	}
}

// TestPageOut: the test binary's own resident code and read-only data shrink; the process runs on.
func TestPageOut(t *testing.T) {
	before := fileKiB(t)
	covered, err := memtrim.PageOut()
	if err != nil {
		t.Fatalf("PageOut: %v", err)
	}
	after := fileKiB(t)
	exe, _ := os.Executable()
	st, _ := os.Stat(exe)
	if covered == 0 || covered > uint64(st.Size())*2 {
		t.Errorf("covered %d bytes of a %d-byte binary", covered, st.Size())
	}
	if after >= before || before-after < before/4 {
		t.Errorf("file-backed RSS %d KiB before, %d KiB after paging out the binary", before, after)
	}
	t.Logf("file-backed RSS %d KiB → %d KiB", before, after)
}

func fileKiB(t *testing.T) int64 {
	t.Helper()
	rss, err := testenv.RSSKiB(0)
	if err != nil {
		t.Fatal(err)
	}
	anon, err := testenv.AnonKiB(0)
	if err != nil {
		t.Fatal(err)
	}
	return rss - anon
}
