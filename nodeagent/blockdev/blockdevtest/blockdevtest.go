package blockdevtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
