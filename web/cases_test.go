package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
)

// casesServer serves consoletest.Cases, with the snapshot API unreadable when noSnapshotAPI.
func casesServer(noSnapshotAPI bool) (*console.Snapshot, http.Handler) {
	snap := console.FromObjects(consoletest.Cases("openshift-storage", consoletest.At), consoletest.At)
	if noSnapshotAPI {
		snap.Hidden = append(snap.Hidden, console.HiddenKind{Resource: "volumesnapshotclasses.snapshot.storage.k8s.io", Reason: "the cluster does not serve the snapshot API"})
	}
	return snap, web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap})})
}

func text(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

// classCheckWords is what a page says of a class check, from the read model's fields.
func classCheckWords(c *console.ClassCheck) string {
	switch {
	case c.Unknown != "":
		return c.Name + " cannot be known"
	case !c.Differs:
		return c.Name + " exists"
	case c.InCluster:
		return c.Name + " ≠ differs provisions elsewhere"
	}
	return c.Name + " ≠ differs missing"
}

// The cases the front ends once told differently (issue 41 points 1-5 and 7), on the pages and in the JSON
// API, each as the read model has it: the class checks (with the snapshot API served and not), defaults,
// a v2 node's conditions with the object each is on, event counts, Pending claims with why.
func TestCases_PagesAndTheAPISayWhatTheReadModelSays(t *testing.T) {
	for _, noSnapshotAPI := range []bool{false, true} {
		snap, h := casesServer(noSnapshotAPI)
		classes := console.DeviceClasses(snap)
		// The JSON API is the read model, field for field.
		var api []console.DeviceClassView
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/deviceclasses", nil))
		if err := json.Unmarshal(rec.Body.Bytes(), &api); err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(classes); !reflect.DeepEqual(api, roundTrip(t, want)) {
			t.Errorf("/api/v1/deviceclasses differs from the read model:\n%s\n%s", rec.Body.String(), want)
		}
		var raw []struct {
			Name     string `json:"name"`
			Capacity struct {
				Text string `json:"text"`
			} `json:"capacity"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		for i, d := range raw {
			if want := classes[i].Capacity.Text(); d.Capacity.Text != want {
				t.Errorf("/api/v1/deviceclasses %s: capacity text %q, the console says %q", d.Name, d.Capacity.Text, want)
			}
		}
		_, doc := get(t, h, "/deviceclasses")
		for _, d := range classes {
			panel := doc.Find(`[data-deviceclass="` + d.Name + `"]`)
			words := text(panel)
			for _, c := range []*console.ClassCheck{d.StorageClass, d.SnapshotClass} {
				if c != nil && !strings.Contains(words, classCheckWords(c)) {
					t.Errorf("snapshot API unreadable %v: class %s: page lacks %q: %s", noSnapshotAPI, d.Name, classCheckWords(c), words)
				}
			}
			if got := strings.Contains(text(panel.Find("h3")), "default"); got != d.Default {
				t.Errorf("class %s: default on the page %v, in the read model %v", d.Name, got, d.Default)
			}
		}
		if noSnapshotAPI {
			continue
		}
		// Node 2's conditions: each once, on its object; the v1 object's "nothing desired" is not there.
		v, err := console.Node(snap, consoletest.SandboxNode2)
		if err != nil {
			t.Fatal(err)
		}
		_, doc = get(t, h, "/nodes/"+consoletest.SandboxNode2)
		rows := doc.Find(`[data-testid=condition-row]`)
		if rows.Length() != len(v.Conditions) {
			t.Errorf("%d condition rows, the read model has %d", rows.Length(), len(v.Conditions))
		}
		sawV1 := false
		for i, c := range v.Conditions {
			row := rows.Eq(i)
			if want := "on " + c.Object.Kind + " " + c.Object.Name; row.AttrOr("data-type", "") != c.Type || text(row.Find(`[data-testid=condition-object]`)) != want ||
				!strings.Contains(text(row), c.Message) {
				t.Errorf("condition row %d = %q, want %s %s %q", i, text(row), c.Type, want, c.Message)
			}
			sawV1 = sawV1 || c.Message == consoletest.CasesV1Condition && c.Object.Kind == "LVMVolumeGroupNodeStatus"
		}
		if !sawV1 || strings.Contains(text(doc.Selection), "no volume group is desired on this node") {
			t.Errorf("node 2's conditions: the v1 object's own condition shown %v, its 'nothing desired' must not be: %v", sawV1, v.Conditions)
		}
		// Event counts, as kubectl counts them.
		counts := map[string]string{}
		doc.Find(`[data-testid=event-row]`).Each(func(_ int, s *goquery.Selection) {
			counts[text(s.Find("td").Eq(2))] = text(s.Find("td").Last())
		})
		for reason, want := range map[string]int{"VolumeGroupChecked": consoletest.CasesCoreCount, "ThinPoolFailed": consoletest.CasesSeriesCount} {
			if counts[reason] != strconv.Itoa(want) {
				t.Errorf("event %s counted %q on the page, want %d", reason, counts[reason], want)
			}
		}
		// Pending claims, listed with why.
		_, doc = get(t, h, "/volumes")
		for _, vol := range console.Volumes(snap) {
			if vol.PVCPhase != "Pending" {
				continue
			}
			row := doc.Find(`[data-testid=volume-row][data-claim="` + vol.PVC + `"]`)
			if row.Length() != 1 || !strings.Contains(text(row), vol.Topic.Title) || (vol.Node != "" && !strings.Contains(text(row), vol.Node)) {
				t.Errorf("Pending claim %s: row %q, want its explanation %q and node %q", vol.PVC, text(row), vol.Topic.Title, vol.Node)
			}
			// Its move page answers (issue 41 point 7: it was a 404), saying why it is pending.
			rec, move := get(t, h, "/claims/"+vol.ClaimNamespace+"/"+vol.ClaimName+"/move")
			if rec.Code != http.StatusOK || !strings.Contains(text(move.Selection), vol.Topic.Title) {
				t.Errorf("move page of Pending claim %s: %d %q", vol.PVC, rec.Code, text(move.Find("main")))
			}
		}
		for _, claim := range []string{consoletest.CasesWaitingClaim, consoletest.CasesOrphanClaim} {
			if doc.Find(`[data-claim="`+consoletest.CasesClaimNS+"/"+claim+`"]`).Length() != 1 {
				t.Errorf("claim %s is not listed", claim)
			}
		}
	}
}

func roundTrip(t *testing.T, b []byte) []console.DeviceClassView {
	var out []console.DeviceClassView
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
