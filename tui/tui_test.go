package tui_test

import (
	"bytes"
	"context"
	"io"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/tui"
)

// renderer has a fixed colour profile, per test: the goldens hold plain text.
func renderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return r
}

func prepared() *console.Snapshot {
	s := console.FromObjects(consoletest.Prepared("lvms"), consoletest.At)
	s.Cluster = "test-cluster"
	return s
}

func key(s string) tea.KeyMsg {
	switch s {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

// run starts the UI in a real bubbletea program at a fixed size, waits for the first snapshot, sends keys
// in order and returns the final screen.
func run(t *testing.T, src console.Source, w, h int, keys ...string) string {
	t.Helper()
	m := tui.New(tui.Options{Source: src, Renderer: renderer(), Poll: time.Hour})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		return bytes.Contains(b, []byte("snapshot ")) || bytes.Contains(b, []byte("could not be read"))
	},
		teatest.WithDuration(10*time.Second))
	for _, k := range keys {
		tm.Send(key(k))
	}
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	return tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).View()
}

// checkScreen asserts the screen has exactly h lines of width w.
func checkScreen(t *testing.T, screen string, w, h int) {
	t.Helper()
	lines := strings.Split(screen, "\n")
	if len(lines) != h {
		t.Errorf("%d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if lipgloss.Width(l) != w {
			t.Errorf("line %d is %d wide, want %d: %q", i, lipgloss.Width(l), w, l)
		}
	}
}

func golden80x24(t *testing.T, keys ...string) string {
	t.Helper()
	screen := run(t, console.Static{Snap: prepared()}, 80, 24, keys...)
	checkScreen(t, screen, 80, 24)
	golden.RequireEqual(t, []byte(screen))
	return screen
}

func goldenWide(t *testing.T, keys ...string) string {
	t.Helper()
	screen := run(t, console.Static{Snap: prepared()}, 160, 48, keys...)
	checkScreen(t, screen, 160, 48)
	golden.RequireEqual(t, []byte(screen))
	return screen
}

func TestOverview80x24(t *testing.T) {
	s := golden80x24(t)
	for _, want := range []string{"≠ worker-b", "Degraded", "Path not found on the node"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q", want)
		}
	}
}

func TestOverviewWide(t *testing.T) { goldenWide(t) }

// Open worker-b (listed first: Degraded): the missing device is first, marked, with its explanation.
func TestNodeDegraded80x24(t *testing.T) {
	s := golden80x24(t, "enter")
	for _, want := range []string{"≠ vg1 /dev/nvme1n1", "missing", "Path not found on the node.", "NotFound: \"/dev/nvme1n1 was not found\""} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q", want)
		}
	}
}

func TestNodeDegradedWide(t *testing.T) { goldenWide(t, "enter") }

// An excluded device with two reasons, one of them destructive advice with its warning.
func TestExcludedDeviceWide(t *testing.T) {
	s := goldenWide(t, "enter", "/", "sdb", "enter", "enter", "j", "j")
	for _, want := range []string{"scratch ForeignSignature", "LVMS only uses empty devices", "WARNING: Wiping destroys every byte of data on /dev/sdb"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q", want)
		}
	}
}

func TestHelp80x24(t *testing.T) {
	s := golden80x24(t, "?")
	if !strings.Contains(s, "Jump (:) to nodes, node <name>, dc (device classes), volumes or events") {
		t.Error("help lacks the jump commands")
	}
}

func TestFilterAndJump(t *testing.T) {
	tests := []struct {
		name     string
		keys     []string
		want     []string
		wantNone []string
	}{
		{name: "filter nodes", keys: []string{"/", "c", "enter"}, want: []string{"nodes (1) /c", "worker-c"}, wantNone: []string{"worker-a  "}},
		{name: "esc clears the filter", keys: []string{"/", "c", "enter", "esc"}, want: []string{"nodes (3)"}},
		{name: "jump to device classes", keys: []string{":", "dc", "enter"}, want: []string{"device classes (3)", "≠ bulk", "bulk-storage: missing"}},
		{name: "jump to a node", keys: []string{":", "node worker-c", "enter"}, want: []string{"worker-c (", "legacy /dev/vdb"}},
		{name: "jump to volumes", keys: []string{":", "volumes", "enter"}, want: []string{"volumes (2)", "≠ pvc-0c3", "Volume without a PersistentVolume"}},
		{name: "jump to events", keys: []string{":", "events", "enter"}, want: []string{"events (2)", "DevicePathCheckFailed"}},
		{name: "unknown command", keys: []string{":", "frobnicate", "enter"}, want: []string{"unknown command frobnicate"}},
		{name: "unknown node", keys: []string{":", "node nope", "enter"}, want: []string{`node "nope" not found`}},
		{name: "back from a node", keys: []string{"enter", "esc"}, want: []string{"nodes (3)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var keys []string
			for _, k := range tc.keys {
				if len(k) > 1 && k != "enter" && k != "esc" {
					for _, r := range k {
						keys = append(keys, string(r))
					}
					continue
				}
				keys = append(keys, k)
			}
			s := run(t, console.Static{Snap: prepared()}, 120, 30, keys...)
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("screen lacks %q:\n%s", w, s)
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(s, w) {
					t.Errorf("screen shows %q", w)
				}
			}
		})
	}
}

func TestResize(t *testing.T) {
	for _, size := range [][2]int{{20, 5}, {40, 10}, {80, 24}, {211, 63}} {
		s := run(t, console.Static{Snap: prepared()}, size[0], size[1], "j", "enter")
		checkScreen(t, s, max(size[0], 20), max(size[1], 5))
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		src  console.Source
		want string
	}{
		{"forbidden", console.Static{Err: &console.AccessError{User: "bob", Resource: "lvmnodes.lvm.topolvm.io"}},
			`Forbidden: user "bob" may not list lvmnodes.lvm.topolvm.io`},
		{"not installed", console.Static{Snap: &console.Snapshot{Installed: false}}, "LVMS is not installed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := run(t, tc.src, 100, 20)
			if !strings.Contains(strings.ReplaceAll(s, "\n", " "), tc.want) {
				t.Errorf("screen lacks %q:\n%s", tc.want, s)
			}
		})
	}
}

// notifying is a source that changes and says so, like a live cluster's informers.
type notifying struct {
	mu   sync.Mutex
	snap *console.Snapshot
	subs []chan struct{}
}

func (n *notifying) Snapshot(context.Context) (*console.Snapshot, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.snap, nil
}

func (n *notifying) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	n.subs = append(n.subs, ch)
	n.mu.Unlock()
	return ch
}

func (n *notifying) set(s *console.Snapshot) {
	n.mu.Lock()
	n.snap = s
	subs := n.subs
	n.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func TestLiveUpdate(t *testing.T) {
	src := &notifying{snap: prepared()}
	m := tui.New(tui.Options{Source: src, Renderer: renderer(), Poll: time.Hour})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(100, 30))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("2/3 nodes ready")) }, teatest.WithDuration(10*time.Second))

	changed := prepared()
	for i := range changed.LVMNodes {
		if changed.LVMNodes[i].Name == consoletest.NodeB {
			changed.LVMNodes[i].Status.State = lvmv2.StateReady
			changed.LVMNodes[i].Status.Message = ""
			// The agent also reports the volume groups healthy again: a False condition keeps a node Degraded.
			meta.SetStatusCondition(&changed.LVMNodes[i].Status.Conditions, metav1.Condition{Type: lvmv2.ConditionVolumeGroupsHealthy,
				Status: metav1.ConditionTrue, Reason: "AllHealthy", Message: "every volume group is healthy"})
		}
	}
	src.set(changed)
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("3/3 nodes ready")) }, teatest.WithDuration(10*time.Second))
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
}
