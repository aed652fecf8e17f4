package volumegroup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/filter"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/selector"
)

// memWipes is a WipeRecords kept in memory; share one value between engines to model an agent restart.
type memWipes struct {
	mu  sync.Mutex
	rec map[string]WipeRecord
	// broken makes the records unreadable.
	broken error
}

func (m *memWipes) Wiped(vg, path string) (WipeRecord, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.broken != nil {
		return WipeRecord{}, false, m.broken
	}
	r, ok := m.rec[vg+"|"+path]
	return r, ok, nil
}

func (m *memWipes) Begin(_ context.Context, vg, path string, at time.Time) error {
	return m.put(vg, path, WipeRecord{At: at})
}

func (m *memWipes) Record(_ context.Context, vg, path string, at time.Time) error {
	return m.put(vg, path, WipeRecord{At: at, Done: true})
}

func (m *memWipes) put(vg, path string, r WipeRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec == nil {
		m.rec = map[string]WipeRecord{}
	}
	m.rec[vg+"|"+path] = r
	return nil
}

// commandLog records the commands an executor ran, then delegates.
type commandLog struct {
	next lvm.Executor
	mu   sync.Mutex
	ran  []string
	// fail makes commands whose line contains the key fail as if the process had been killed.
	fail map[string]bool
}

var errKilled = errors.New("signal: killed")

func (c *commandLog) Execute(ctx context.Context, cmd lvm.Command) (lvm.Result, error) {
	line := strings.Join(cmd.Argv, " ")
	c.mu.Lock()
	c.ran = append(c.ran, line)
	var killed bool
	for k := range c.fail {
		killed = killed || strings.Contains(line, k)
	}
	c.mu.Unlock()
	if killed {
		return lvm.Result{}, errKilled
	}
	next := c.next
	if next == nil {
		next = lvm.OSExecutor{}
	}
	return next.Execute(ctx, cmd)
}

func (c *commandLog) count(substr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.ran {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

func (c *commandLog) reset() {
	c.mu.Lock()
	c.ran = nil
	c.mu.Unlock()
}

func knameSelector(t testing.TB, devs ...string) *selector.Selector {
	t.Helper()
	s, err := selector.FromV2(lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
		{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: devs}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pathSelector selects devices by path (by-id links or kernel names), as a user naming disks does.
func pathSelector(t testing.TB, paths ...string) *selector.Selector {
	t.Helper()
	s, err := selector.FromV2(lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
		{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: paths}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// node is a desired node with thick volume groups selecting devices by kname.
func node(vgs ...desired.VolumeGroup) *desired.Node {
	return &desired.Node{VolumeGroups: vgs}
}

func excludedCodes(r Result, kname string) []string {
	for _, e := range r.Filter.Excluded {
		if e.KName == kname {
			return e.Codes()
		}
	}
	return nil
}

func excludedOf(r Result, kname string) (filter.Excluded, bool) {
	for _, e := range r.Filter.Excluded {
		if e.KName == kname {
			return e, true
		}
	}
	return filter.Excluded{}, false
}

func pvNames(rep *lvm.Report, vg string) []string {
	var out []string
	for _, pv := range rep.PVsOf(vg) {
		out = append(out, pv.Name)
	}
	slices.Sort(out)
	return out
}

// sortedDevs is the expected side of a pvNames comparison: loop devices come in
// whatever order the kernel hands them out (loop10 sorts before loop9).
func sortedDevs(devs ...string) []string {
	out := slices.Clone(devs)
	slices.Sort(out)
	return out
}

func inventoryHas(inv *blockdev.Inventory, kname, sig string) bool {
	d, ok := inv.Get(kname)
	return ok && d.HasSignature(sig)
}
