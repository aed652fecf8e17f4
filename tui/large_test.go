package tui_test

import (
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

// largeSource is 5,000 nodes: every 50th is Degraded (100 nodes), the others Ready.
func largeSource() console.Source {
	return console.Static{Snap: console.FromObjects(consoletest.Large(5000, 16), consoletest.At)}
}

// At 5,000 nodes the list starts with the Degraded nodes, says which rows of how many are on screen, and
// the status bar counts every node.
func TestLargeClusterFirstScreen(t *testing.T) {
	screen := run(t, largeSource(), 160, 48)
	checkScreen(t, screen, 160, 48)
	lines := strings.Split(screen, "\n")
	if !strings.Contains(lines[1], "nodes 1–45 of 5000") {
		t.Errorf("list header %q, want the rows shown of 5000", lines[1])
	}
	if !strings.Contains(lines[2], "node-0000") || !strings.Contains(lines[2], "Degraded") || !strings.Contains(lines[3], "node-0050") {
		t.Errorf("first rows %q, %q: want the Degraded nodes first", lines[2], lines[3])
	}
	for _, want := range []string{"Node node-0000: Degraded", "/dev/nvme9n1 was not found", "4900/5000 nodes ready"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
}

// G scrolls to the last node, whose detail is shown; a filter finds any node and opens it.
func TestLargeClusterReachesEveryNode(t *testing.T) {
	screen := run(t, largeSource(), 160, 48, "G")
	lines := strings.Split(screen, "\n")
	if !strings.Contains(lines[1], "nodes 4956–5000 of 5000") || !strings.Contains(lines[47-1], "node-4999") {
		t.Errorf("after G: header %q, last row %q; want the last rows, ending with node-4999", lines[1], lines[46])
	}
	if !strings.Contains(screen, "Node node-4999: Ready") {
		t.Errorf("after G the detail is not node-4999's:\n%s", screen)
	}

	screen = run(t, largeSource(), 160, 48, "/", "n", "o", "d", "e", "-", "4", "3", "2", "1", "enter", "enter")
	if !strings.Contains(screen, "nodes › node-4321") || !strings.Contains(screen, "vg1 /dev/sda") {
		t.Errorf("filtering for node-4321 and opening it does not show its devices:\n%s", screen)
	}
}
