package tui_test

import (
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
)

// Text from the cluster reaches the terminal without escape sequences: a cluster name (from a kubeconfig
// or a bundle) or a status message cannot clear the screen, move the cursor or write the clipboard (OSC 52).
func TestTerminalGetsNoEscapeSequencesFromTheCluster(t *testing.T) {
	snap := prepared()
	snap.Cluster = "prod\x1b]52;c;ZWNobyBvd25lZA==\x07\x1b[2J\x1b[Hcluster\x9b31m\x00"
	msg := "disk gone\x1b]0;fake title\x1b\\\x1b[1A\rdone"
	for i := range snap.LVMNodes {
		for j := range snap.LVMNodes[i].Status.Conditions {
			snap.LVMNodes[i].Status.Conditions[j].Message = msg
		}
	}
	original := snap.Cluster
	screen := run(t, console.Static{Snap: snap}, 200, 40)
	for _, bad := range []string{"\x1b", "\x07", "\x9b", "\x00", "\r"} {
		if strings.Contains(screen, bad) {
			t.Errorf("screen contains %q:\n%q", bad, screen)
		}
	}
	if !strings.Contains(screen, "prod") || !strings.Contains(screen, "cluster") {
		t.Errorf("the cluster's name is gone, not only its escapes:\n%s", screen)
	}
	if snap.Cluster != original {
		t.Error("the source's snapshot was changed: a live source shares it with its informers")
	}
}
