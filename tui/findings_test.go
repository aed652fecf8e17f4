package tui_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/tui"
)

// runBundle runs the TUI on a hand-made bundle whose worker-b is Degraded, as `lvms tui --bundle` opens
// it, sends keys (":findings" types the jump) and returns the final screen.
func runBundle(t *testing.T, withBundle bool, w, h int, keys ...string) string {
	t.Helper()
	s := bundletest.Healthy()
	n := bundletest.Find[*lvmv2.LVMNode](s, bundletest.NodeB)
	n.Status.State, n.Status.Message = lvmv2.StateDegraded, "thin pool cannot be created"
	b := s.Bundle(t)
	opts := tui.Options{Source: bundle.NewSource(b), Renderer: renderer(), Poll: time.Hour}
	if withBundle {
		opts.Bundle = &tui.Bundle{Name: "cluster.tar.gz", At: b.Manifest.Started, Findings: analyze.Run(b)}
	}
	tm := teatest.NewTestModel(t, tui.New(opts), teatest.WithInitialTermSize(w, h))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("snapshot ")) }, teatest.WithDuration(10*time.Second))
	for _, k := range keys {
		if k == ":findings" {
			tm.Send(key(":"))
			for _, r := range "findings" {
				tm.Send(key(string(r)))
			}
			tm.Send(key("enter"))
			continue
		}
		tm.Send(key(k))
	}
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	return tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).View()
}

func TestBundle_ReadOnlyBannerAndFindings(t *testing.T) {
	screen := runBundle(t, true, 160, 30)
	if !strings.Contains(strings.Split(screen, "\n")[0], "READ-ONLY bundle cluster.tar.gz collected 2026-11-22 10:00:00Z") {
		t.Errorf("title bar lacks the read-only banner:\n%s", screen)
	}
	screen = runBundle(t, true, 160, 30, ":findings")
	checkScreen(t, screen, 160, 30)
	for _, want := range []string{"findings (", "NodeNotReady", "FAIL NodeNotReady: Node storage is Degraded", "worker-b is Degraded"} {
		if !strings.Contains(screen, want) {
			t.Errorf("findings screen lacks %q:\n%s", want, screen)
		}
	}
	if screen = runBundle(t, true, 160, 30, ":findings", "enter"); !strings.Contains(screen, "findings › worker-b") {
		t.Errorf("enter on a node's finding does not open the node:\n%s", screen)
	}
}

func TestFindings_OnlyForBundles(t *testing.T) {
	screen := runBundle(t, false, 120, 20, ":findings")
	if !strings.Contains(screen, "findings are shown for support bundles") || strings.Contains(screen, "READ-ONLY") {
		t.Errorf("live TUI:\n%s", screen)
	}
}
