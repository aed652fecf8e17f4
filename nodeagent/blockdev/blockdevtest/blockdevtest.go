package blockdevtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvm/lvmtest"
)

// Dir is the blockdev testdata directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// HostLoops replays the host-loops recording: the inventory and the LVM report of the agent whose devices
// file is rec-a.devices (loop2 is its VG rec-vg1, loop10 its orphan PV).
func HostLoops(t testing.TB) (*blockdev.Inventory, *lvm.Report) {
	t.Helper()
	dir := filepath.Join(Dir(), "host-loops")
	rp := lvmtest.Replay(t, filepath.Join(dir, "session.json"), "record it with nodeagent/blockdev/testdata/record-host-loops.sh")
	r := lvm.Runner{Exec: rp, DevicesFile: "rec-a.devices"}
	inv, err := (&blockdev.Discoverer{Runner: r, Root: filepath.Join(dir, "root")}).Discover(context.Background())
	if err != nil {
		t.Fatalf("discover with %s: %v", rp, err)
	}
	rep, err := r.FullReport(context.Background())
	if err != nil {
		t.Fatalf("report with %s: %v", rp, err)
	}
	return inv, rep
}

// ServerRunner answers lsblk and wipefs from the server fixture; wipefs answers only for the devices it is
// asked about, as the real command does.
type ServerRunner struct {
	Lsblk, Wipefs []byte
	Ran           [][]string
}

// Run implements blockdev.Runner.
func (s *ServerRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	s.Ran = append(s.Ran, append([]string{name}, args...))
	switch name {
	case "lsblk":
		return s.Lsblk, nil
	case "wipefs":
		var doc struct {
			Signatures []map[string]any `json:"signatures"`
		}
		if err := json.Unmarshal(s.Wipefs, &doc); err != nil {
			return nil, err
		}
		var keep []map[string]any
		for _, sig := range doc.Signatures {
			if dev, ok := sig["device"].(string); ok && slices.Contains(args, "/dev/"+dev) {
				keep = append(keep, sig)
			}
		}
		if len(keep) == 0 {
			return nil, nil
		}
		return json.Marshal(map[string]any{"signatures": keep})
	}
	return nil, fmt.Errorf("%s: not in the server fixture", name)
}

// Server discovers the hand-written server fixture and parses its LVM report.
func Server(t testing.TB) (*blockdev.Inventory, *lvm.Report, *ServerRunner) {
	t.Helper()
	dir := filepath.Join(Dir(), "server")
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	r := &ServerRunner{Lsblk: read("lsblk.json"), Wipefs: read("wipefs.json")}
	inv, err := (&blockdev.Discoverer{Runner: r, Root: filepath.Join(dir, "root")}).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := lvm.ParseReport(read("fullreport.json"))
	if err != nil {
		t.Fatal(err)
	}
	return inv, rep, r
}

// MatchLsblk lists the live machine's block devices both from /sys (blockdev.ReadSysfs) and with lsblk, as
// the agent did before it read /sys, and fails the test for every device compare selects that the two
// list differently (devices other tests attach meanwhile are left out by compare). It returns the devices
// read from /sys by KName.
func MatchLsblk(t testing.TB, compare func(kname string) bool) map[string]blockdev.Device {
	t.Helper()
	out, err := exec.Command("lsblk", blockdev.LsblkArgs(blockdev.Columns)...).Output()
	if err != nil {
		t.Fatalf("lsblk: %v", err)
	}
	want, err := blockdev.ParseLsblk(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := blockdev.ReadSysfs("/")
	if err != nil {
		t.Fatal(err)
	}
	byKName := func(devs []blockdev.Device) map[string]blockdev.Device {
		m := map[string]blockdev.Device{}
		for _, d := range devs {
			if compare(d.KName) {
				slices.Sort(d.MountPoints) // lsblk's order follows its own table walk
				m[d.KName] = d
			}
		}
		return m
	}
	w, g := byKName(want), byKName(got)
	for k, wd := range w {
		gd, ok := g[k]
		switch {
		case !ok:
			t.Errorf("%s: lsblk lists it, /sys does not", k)
		case !reflect.DeepEqual(gd, wd):
			t.Errorf("%s differs:\n from /sys: %+v\n lsblk:     %+v", k, gd, wd)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s: /sys lists it, lsblk does not", k)
		}
	}
	t.Logf("/sys and lsblk agree on %d devices: %v", len(w), slices.Sorted(maps.Keys(w)))
	return g
}
