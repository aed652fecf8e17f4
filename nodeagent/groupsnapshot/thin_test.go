package groupsnapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeviceIDs_RefusesWhatCouldHitAnotherDevice: the thin device a group deletes and re-creates is a
// snapshot's only: never one another LV reports, never the origin's, never an active one.
func TestDeviceIDs_RefusesWhatCouldHitAnotherDevice(t *testing.T) {
	members := []Member{{VG: "thin", Origin: "a", Snapshot: "sa"}}
	base := func() map[string]thinLV {
		return map[string]thinLV{
			"a":  {Name: "a", Pool: "pool", Attr: "Vwi-a-tz--", ThinID: 1},
			"sa": {Name: "sa", Pool: "pool", Attr: "Vwi---tz-k", ThinID: 6},
			"b":  {Name: "b", Pool: "pool", Attr: "Vwi-a-tz--", ThinID: 2},
		}
	}
	snaps, origins, err := deviceIDs(members, "pool", base())
	if err != nil || len(snaps) != 1 || snaps[0] != 6 || origins[0] != 1 {
		t.Fatalf("got %v %v %v, want snapshot 6 of origin 1", snaps, origins, err)
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]thinLV)
		want string
	}{
		{"snapshot shares the origin's ID", func(m map[string]thinLV) { m["sa"] = thinLV{Name: "sa", Pool: "pool", Attr: "Vwi---tz-k", ThinID: 1} }, "same thin device ID"},
		{"snapshot shares another LV's ID", func(m map[string]thinLV) { m["sa"] = thinLV{Name: "sa", Pool: "pool", Attr: "Vwi---tz-k", ThinID: 2} }, "same thin device ID"},
		{"snapshot active", func(m map[string]thinLV) { m["sa"] = thinLV{Name: "sa", Pool: "pool", Attr: "Vwi-a-tz--", ThinID: 6} }, "is active"},
		{"snapshot without an ID", func(m map[string]thinLV) { m["sa"] = thinLV{Name: "sa", Pool: "pool", Attr: "Vwi---tz-k"} }, "refusing to replace"},
		{"snapshot in another pool", func(m map[string]thinLV) { m["sa"] = thinLV{Name: "sa", Pool: "other", Attr: "Vwi---tz-k", ThinID: 6} }, "not in thin pool"},
		{"snapshot missing", func(m map[string]thinLV) { delete(m, "sa") }, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lvs := base()
			tc.edit(lvs)
			if _, _, err := deviceIDs(members, "pool", lvs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestParseThinLVs(t *testing.T) {
	lvs, err := parseThinLVs([]byte(`{"report":[{"lv":[{"lv_name":"a","pool_lv":"pool","lv_attr":"Vwi-a-tz--","thin_id":"1"},{"lv_name":"[pool_tdata]","pool_lv":"","lv_attr":"Twi-ao----","thin_id":""}]}]}`))
	if err != nil || lvs["a"].ThinID != 1 || lvs["a"].Pool != "pool" || lvs["pool_tdata"].ThinID != 0 {
		t.Fatalf("got %+v, %v", lvs, err)
	}
	for _, bad := range []string{`{`, `{"report":[{"lv":[{"lv_name":"a","thin_id":"-1"}]}]}`, `{"report":[{"lv":[{"lv_name":"a","thin_id":"99999999999"}]}]}`} {
		if _, err := parseThinLVs([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
}

func TestReadIntent_RefusesIDsThatDoNotMatchTheMembers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "group-g.json")
	for _, body := range []string{
		`{"id":"g","members":[{"vg":"thin","origin":"a","snapshot":"sa"}],"pool":"pool","snapshotIDs":[6,7]}`,
		`{"id":"g","members":[{"vg":"thin","origin":"a","snapshot":"sa"}],"pool":"-x","snapshotIDs":[6]}`,
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readIntent(path); err == nil || !strings.Contains(err.Error(), "do not match") {
			t.Errorf("%s: got %v", body, err)
		}
	}
}
