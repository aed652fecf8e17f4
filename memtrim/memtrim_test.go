package memtrim_test

import (
	"bufio"
	"os"
	"os/exec"
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

// touchBinary faults every page of the process's read-only mappings of its binary in (reading them
// through /proc/self/mem maps them, as touching them would).
func touchBinary(t *testing.T) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	regions, err := memtrim.SmapsRegions(string(smaps), exe)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	page := make([]byte, 1)
	for _, r := range regions {
		for a := r.Start; a < r.End; a += 4096 {
			if _, err := mem.ReadAt(page, int64(a)); err != nil {
				t.Fatalf("read %x: %v", a, err)
			}
		}
	}
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

// Recorded from /proc/self/smaps (two mappings of the binary, one with a copied-on-write page, and an
// anonymous one between them), trimmed to the lines that matter.
const smaps = `00400000-01a5c000 r-xp 00000000 fe:00 1234                               /usr/bin/lvms
Size:              22896 kB
Rss:                9020 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me sd
01a5c000-03b3e000 r--p 0165c000 fe:00 1234                               /usr/bin/lvms
Size:              34696 kB
Anonymous:             4 kB
VmFlags: rd mr mw me sd
03b3e000-03b9f000 rw-p 0373e000 fe:00 1234                               /usr/bin/lvms
Anonymous:           120 kB
c000000000-c004000000 rw-p 00000000 00:00 0
Anonymous:          4096 kB
`

func TestSmapsRegions(t *testing.T) {
	got, err := memtrim.SmapsRegions(smaps, "/usr/bin/lvms")
	if err != nil {
		t.Fatal(err)
	}
	want := []memtrim.Region{{Start: 0x400000, End: 0x1a5c000, Perms: "r-xp"}, {Start: 0x1a5c000, End: 0x3b3e000, Perms: "r--p", Anonymous: 4}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("regions = %+v, want the read-only private mappings with their copied-on-write part: %+v", got, want)
	}
	if _, err := memtrim.SmapsRegions(smaps+"7f00-7f01 r--p 0 fe:00 1 /usr/bin/lvms\nAnonymous: many\n", "/usr/bin/lvms"); err == nil {
		t.Error("a bad Anonymous line is not an error")
	}
}

// TestPageOut_PagesAnotherProcessMapsToo: with a second process mapping the same binary (on MicroShift
// the operator and the node agent run from one image), the pages it keeps resident leave this process's
// RSS all the same (MADV_PAGEOUT alone leaves them), and both processes run on.
func TestPageOut_PagesAnotherProcessMapsToo(t *testing.T) {
	if os.Getenv("MEMTRIM_HOLD") == "1" {
		// The second process: the same binary, all of it resident, held until the parent is done.
		touchBinary(t)
		_, _ = os.Stdout.WriteString("resident\n")
		_, _ = os.Stdin.Read(make([]byte, 1))
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestPageOut_PagesAnotherProcessMapsToo$")
	cmd.Env = append(os.Environ(), "MEMTRIM_HOLD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "resident\n" {
		t.Fatalf("the second process: %q, %v", line, err)
	}
	touchBinary(t)
	before := fileKiB(t)
	if _, err := memtrim.PageOut(); err != nil {
		t.Fatalf("PageOut: %v", err)
	}
	after := fileKiB(t)
	t.Logf("file-backed RSS %d KiB → %d KiB with another process mapping the binary", before, after)
	if after > before/4 {
		t.Errorf("file-backed RSS %d KiB before, %d KiB after: the pages the other process maps stayed resident here", before, after)
	}
	if _, err := testenv.RSSKiB(cmd.Process.Pid); err != nil {
		t.Errorf("the other process: %v", err)
	}
}
