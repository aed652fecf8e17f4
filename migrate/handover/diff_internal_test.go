package handover

import (
	"strings"
	"testing"
)

// Verify must not call a migration failed because a thin pool's volumes were written to meanwhile (their
// class's capacity follows real use), but must report a device class that no longer offers capacity.
func TestDiff_Capacity(t *testing.T) {
	node := func(capacity map[string]string) Snapshot {
		return Snapshot{Nodes: []NodeStorage{{Name: "node-a", Capacity: capacity}}}
	}
	before := node(map[string]string{"thin": "1677799194", "thick": "1073741824"})
	if got := diff(before, node(map[string]string{"thin": "1671446081", "thick": "1073741824"})); len(got) != 0 {
		t.Errorf("capacity moved by writes is a difference: %q", got)
	}
	got := diff(before, node(map[string]string{"thin": "1677799194"}))
	if len(got) != 1 || !strings.Contains(got[0], "device class thick reports no capacity") {
		t.Errorf("a class that lost its capacity: got %q, want one difference naming class thick", got)
	}
}
