package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
)

// The node page lists the node's group snapshots: each with its VolumeGroupSnapshot, phase, suspend time
// and member count, its members (snapshot, source volume, claim, size, ready), and a failed group's reason
// and message.
func TestNodePage_GroupSnapshots(t *testing.T) {
	snap := console.FromObjects(consoletest.GroupSnapshots("lvms"), consoletest.At)
	h := web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap})})
	rec, doc := get(t, h, "/nodes/"+consoletest.NodeA)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	ready := doc.Find(testid("group-snapshot") + `[data-group="` + consoletest.GroupReady + `"]`)
	if ready.Length() != 1 || ready.AttrOr("data-phase", "") != "Ready" || ready.AttrOr("data-members", "") != "2" {
		t.Fatalf("no Ready group %s with 2 members: %q", consoletest.GroupReady, doc.Find(testid("group-snapshot")).Text())
	}
	if got := ready.Find(testid("group-vgs")).Text(); got != "lvms/"+consoletest.GroupVGS {
		t.Errorf("VolumeGroupSnapshot = %q", got)
	}
	if got := ready.Find(testid("group-suspend")).Text(); got != consoletest.GroupSuspend.String() {
		t.Errorf("suspend time = %q, want %s", got, consoletest.GroupSuspend)
	}
	if got := ready.Find(testid("group-member-count")).Text(); got != "2 members, 1 ready" {
		t.Errorf("member count = %q", got)
	}
	a := ready.Find(testid("group-member") + `[data-snapshot="` + consoletest.GroupMemberA + `"]`)
	if a.AttrOr("data-source", "") != "pvc-0a1" || a.AttrOr("data-ready", "") != "true" ||
		!strings.Contains(a.Text(), "lvms/data-db-0") || !strings.Contains(a.Text(), "10 GiB") {
		t.Errorf("member %s row = %q, want the ready snapshot of pvc-0a1 with its claim and size", consoletest.GroupMemberA, a.Text())
	}
	b := ready.Find(testid("group-member") + `[data-snapshot="` + consoletest.GroupMemberB + `"]`)
	if b.AttrOr("data-source", "") != consoletest.GroupSourceB || b.AttrOr("data-ready", "") != "false" || !strings.Contains(b.Text(), "not ready") {
		t.Errorf("member %s row = %q", consoletest.GroupMemberB, b.Text())
	}
	failed := doc.Find(testid("group-snapshot") + `[data-group="` + consoletest.GroupFailed + `"]`)
	msg := failed.Find(testid("group-message"))
	if failed.AttrOr("data-phase", "") != "Failed" || !strings.Contains(msg.Text(), consoletest.GroupFailReason) ||
		!strings.Contains(msg.Text(), consoletest.GroupFailMsg) || !msg.HasClass("error") {
		t.Errorf("failed group %q does not show its reason and message as an error", failed.Text())
	}
	if !strings.Contains(failed.Find(testid("group-member")).Text(), "no LogicalVolume") {
		t.Errorf("the failed group's member %q does not say it has no LogicalVolume", failed.Find(testid("group-member")).Text())
	}
	// A node without group snapshots says so.
	_, docB := get(t, h, "/nodes/"+consoletest.NodeB)
	if docB.Find(testid("group-snapshot")).Length() != 0 || docB.Find(testid("no-group-snapshots")).Length() != 1 {
		t.Error("worker-b shows group snapshots or does not say it has none")
	}
}
