package web_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/explain"
	"github.com/lvms-dev/lvms/web"
)

// sharedServer serves the prepared state plus the shared-volume-group nodes (consoletest.Shared), which are
// kept out of the prepared state so its counts stay as other tests expect them.
func sharedServer() http.Handler {
	objs := append(consoletest.Prepared("lvms"), consoletest.Shared("lvms")...)
	snap := console.FromObjects(objs, consoletest.At)
	return web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap})})
}

func TestNodePage_SharedLocking(t *testing.T) {
	h := sharedServer()
	tests := []struct {
		node                 string
		mode, hostID         string
		modeHealth           console.Health
		watchdog, noFencing  bool
		lockspace, initBy    string
		active               string // the volume group's active volumes as the page says them
		wantInPanel, notWant []string
	}{
		{node: consoletest.SharedNodeOK, mode: "Agent", modeHealth: console.HealthOK, hostID: "1", watchdog: true, lockspace: "Joined", initBy: consoletest.SharedNodeOK,
			active:      "Volumes active on this node: " + consoletest.SharedVolumeRWX + " (Shared)",
			wantInPanel: []string{"run by the node agent", consoletest.FencingOn}, notWant: []string{"No watchdog"}},
		{node: consoletest.SharedNodeNoWatchdog, mode: "Host", modeHealth: console.HealthOK, hostID: "2", noFencing: true, lockspace: "Joined", initBy: consoletest.SharedNodeOK,
			active:      "Volumes active on this node: " + consoletest.SharedVolumeRWX + " (Shared), " + consoletest.SharedVolumeRWO + " (Exclusive)",
			wantInPanel: []string{"run by the host", consoletest.FencingOff, "No watchdog: no fencing", "softdog"}},
		{node: consoletest.SharedNodeNotRunning, mode: "NotRunning", modeHealth: console.HealthError, hostID: "3", noFencing: true, lockspace: "NotJoined",
			active: "Volumes active on this node: none",
			wantInPanel: []string{"not running", "Agent: " + consoletest.NotRunningMessage, "also reported by " + consoletest.SharedNodeLUNMissing,
				"Lock managers not running", "Host ID used by two nodes"}},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			rec, doc := get(t, h, "/nodes/"+tc.node)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			p := doc.Find(testid("shared-locking"))
			if p.Length() != 1 {
				t.Fatalf("%d shared locking panels, want 1", p.Length())
			}
			if got := p.AttrOr("data-mode", ""); got != tc.mode {
				t.Errorf("data-mode = %q, want %q", got, tc.mode)
			}
			if chip := p.Find(testid("lock-mode") + " " + testid("chip")); !chip.HasClass("h-" + string(tc.modeHealth)) {
				t.Errorf("lock managers chip %q is not %s", chip.AttrOr("class", ""), tc.modeHealth)
			}
			if got := p.Find(testid("host-id")).Text(); got != tc.hostID {
				t.Errorf("host ID = %q, want %q", got, tc.hostID)
			}
			if got := p.Find(testid("watchdog")).AttrOr("data-watchdog", ""); got != map[bool]string{true: "true", false: "false"}[tc.watchdog] {
				t.Errorf("data-watchdog = %q, want %v", got, tc.watchdog)
			}
			f := p.Find(testid("fencing"))
			if warned := f.HasClass("notice") && f.AttrOr("data-warning", "") == "true"; warned != tc.noFencing {
				t.Errorf("fencing sentence %q highlighted as a warning: %v, want %v", f.Text(), warned, tc.noFencing)
			}
			text := strings.Join(strings.Fields(p.Text()), " ")
			for _, w := range tc.wantInPanel {
				if !strings.Contains(text, w) {
					t.Errorf("panel lacks %q: %s", w, text)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(text, w) {
					t.Errorf("panel says %q: %s", w, text)
				}
			}
			vg := doc.Find(testid("vg") + `[data-vg="` + consoletest.SharedVG + `"]`)
			if got := vg.Find(testid("vg-lockspace")).AttrOr("data-lockspace", ""); got != tc.lockspace {
				t.Errorf("lockspace = %q, want %q", got, tc.lockspace)
			}
			by := vg.Find(testid("vg-initialized-by"))
			if by.AttrOr("data-node", "") != tc.initBy {
				t.Errorf("initialized by %q, want %q", by.AttrOr("data-node", ""), tc.initBy)
			}
			if tc.initBy != "" && by.AttrOr("href", "") != "/nodes/"+tc.initBy {
				t.Errorf("initialized-by link = %q", by.AttrOr("href", ""))
			}
			active := vg.Find(testid("vg-active-volumes"))
			if got := strings.Join(strings.Fields(active.Text()), " "); got != tc.active {
				t.Errorf("active volumes %q, want %q", got, tc.active)
			}
			if n := active.Find(testid("vg-active-volume")).Length(); active.AttrOr("data-count", "") != strconv.Itoa(n) {
				t.Errorf("data-count = %q, %d active volumes listed", active.AttrOr("data-count", ""), n)
			}
		})
	}
}

// A node whose LUN is missing says so on its volume group, and the lock managers' panel stays quiet about it.
func TestNodePage_SharedLUNMissing(t *testing.T) {
	_, doc := get(t, sharedServer(), "/nodes/"+consoletest.SharedNodeLUNMissing)
	vg := doc.Find(testid("vg") + `[data-vg="` + consoletest.SharedVG + `"]`)
	x := vg.Find(testid("explanation") + `[data-code="` + explain.TopicSharedLUNMissing + `"]`)
	if x.Length() != 1 || !strings.Contains(x.Text(), consoletest.SharedLUN) || !strings.Contains(x.Text(), "multipath -ll") {
		t.Errorf("volume group explanation %q: want SharedLUNMissing quoting the LUN and how to check it", x.Text())
	}
	if vg.Find(testid("vg-lockspace")).Find(testid("chip")).HasClass("h-error") != true {
		t.Error("a Failed volume group out of its lockspace should show its lockspace as an error")
	}
	if doc.Find(testid("shared-locking")+" "+testid("explanation")+`[data-code="`+explain.TopicSharedLUNMissing+`"]`).Length() != 0 {
		t.Error("the LUN explanation belongs to the volume group, not the lock managers")
	}
}

// Node-local nodes have no shared locking panel; the JSON API carries the same fields as the page.
func TestNodePage_NoSharedLockingOnLocalNodes(t *testing.T) {
	h := sharedServer()
	_, doc := get(t, h, "/nodes/"+consoletest.NodeA)
	if n := doc.Find(testid("shared-locking")).Length() + doc.Find(testid("vg-lockspace")).Length(); n != 0 {
		t.Errorf("node-local node shows %d shared locking elements", n)
	}
	rec, _ := get(t, h, "/api/v1/nodes/"+consoletest.SharedNodeNoWatchdog)
	var v console.NodeView
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v.SharedLocking == nil || v.SharedLocking.Mode != "Host" || v.SharedLocking.HostID != 2 || v.SharedLocking.Watchdog ||
		v.VolumeGroups[0].Lockspace != "Joined" || v.VolumeGroups[0].InitializedBy != consoletest.SharedNodeOK {
		t.Errorf("API node view: shared locking %+v, volume group %+v", v.SharedLocking, v.VolumeGroups[0])
	}
}

// Each active volume carries its LV name (the volume ID) and mode, and names its LogicalVolume.
func TestNodePage_SharedActiveVolumeAttrs(t *testing.T) {
	_, doc := get(t, sharedServer(), "/nodes/"+consoletest.SharedNodeNoWatchdog)
	type row struct{ volume, lv, mode, title string }
	var got []row
	doc.Find(testid("vg") + `[data-vg="` + consoletest.SharedVG + `"] ` + testid("vg-active-volume")).Each(func(_ int, s *goquery.Selection) {
		got = append(got, row{s.AttrOr("data-volume", ""), s.AttrOr("data-logical-volume", ""), s.AttrOr("data-mode", ""), s.AttrOr("title", "")})
	})
	want := []row{
		{consoletest.SharedVolumeRWXID, consoletest.SharedVolumeRWX, "Shared", "LV " + consoletest.SharedVolumeRWXID},
		{consoletest.SharedVolumeRWOID, consoletest.SharedVolumeRWO, "Exclusive", "LV " + consoletest.SharedVolumeRWOID},
	}
	if !slices.Equal(got, want) {
		t.Errorf("active volumes %+v, want %+v", got, want)
	}
}

// The volumes page shows, for a volume of the shared driver, its volume group and the nodes where it is
// active (linked, with the mode) instead of a node.
func TestVolumesPage_SharedActiveOn(t *testing.T) {
	rec, doc := get(t, sharedServer(), "/volumes")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	for _, tc := range []struct {
		volume, text string
		nodes        []string
	}{
		{consoletest.SharedVolumeRWX, consoletest.SharedNodeOK + " (Shared), " + consoletest.SharedNodeNoWatchdog + " (Shared)",
			[]string{consoletest.SharedNodeOK, consoletest.SharedNodeNoWatchdog}},
		{consoletest.SharedVolumeRWO, consoletest.SharedNodeNoWatchdog + " (Exclusive)", []string{consoletest.SharedNodeNoWatchdog}},
		{consoletest.SharedVolumeIdle, "no node", nil},
	} {
		r := doc.Find(testid("volume-row") + `[data-volume="` + tc.volume + `"]`)
		if !strings.Contains(r.Text(), "shared volume group "+consoletest.SharedVG) {
			t.Errorf("%s: row does not name the shared volume group: %s", tc.volume, strings.Join(strings.Fields(r.Text()), " "))
		}
		on := r.Find(testid("volume-active-on"))
		if got := strings.Join(strings.Fields(on.Text()), " "); got != tc.text {
			t.Errorf("%s: active on %q, want %q", tc.volume, got, tc.text)
		}
		var nodes []string
		on.Find(testid("volume-active-node")).Each(func(_ int, s *goquery.Selection) {
			if s.AttrOr("href", "") != "/nodes/"+s.AttrOr("data-node", "") {
				t.Errorf("%s: link %q for node %q", tc.volume, s.AttrOr("href", ""), s.AttrOr("data-node", ""))
			}
			nodes = append(nodes, s.AttrOr("data-node", ""))
		})
		if !slices.Equal(nodes, tc.nodes) || on.AttrOr("data-count", "") != strconv.Itoa(len(tc.nodes)) {
			t.Errorf("%s: active on nodes %v (data-count %q), want %v", tc.volume, nodes, on.AttrOr("data-count", ""), tc.nodes)
		}
	}
	// A node-local volume keeps its node link and says nothing about sharing.
	r := doc.Find(testid("volume-row") + `[data-volume="pvc-0a1"]`)
	if r.Find(testid("volume-active-on")).Length() != 0 || r.Find(`a[href="/nodes/`+consoletest.NodeA+`"]`).Length() != 1 {
		t.Errorf("node-local volume row: %s", strings.Join(strings.Fields(r.Text()), " "))
	}
}
