package lvm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The host fixtures were recorded with FullReportArgs from lvm2 2.03.16 on loop devices, each agent with its
// own devices file.
func TestParseReport_HostFixtures(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		wantVGs []VG
		wantPVs []PV
	}{
		{
			name:    "tagged volume group and an orphan physical volume",
			fixture: "fullreport-host-vg-and-orphan.json",
			wantVGs: []VG{{
				Name: "lvxa-vg1", UUID: "v8iFg0-quR4-rdiD-LwV5-wwU3-ih4s-PRCwSN", Tags: []string{"lvms"}, Attr: "wz--n-",
				Size: 620756992, Free: 620756992, ExtentSize: 4194304, ExtentCount: 148, FreeCount: 148, PVCount: 2,
			}},
			wantPVs: []PV{
				{Name: "/dev/loop0", UUID: "qSv9jL-7Mle-T1nH-36O5-IlU4-QgCF-WoEcNi", VGName: "lvxa-vg1", Size: 310378496,
					Free: 310378496, DevSize: 314572800, Attr: "a--", DeviceID: "/tmp/lvx/d1.img", DeviceIDType: "loop_file"},
				{Name: "/dev/loop1", UUID: "d02Mna-UB3f-kPo1-fn9f-1oP9-S8J1-Hlinlp", VGName: "lvxa-vg1", Size: 310378496,
					Free: 310378496, DevSize: 314572800, Attr: "a--", DeviceID: "/tmp/lvx/d2.img", DeviceIDType: "loop_file"},
				{Name: "/dev/loop3", UUID: "U0PtFm-Bh4h-Qf0t-VC3L-eVSi-0rrf-G7mDqd", Size: 314572800, Free: 314572800,
					DevSize: 314572800, Attr: "---"},
			},
		},
		{
			name:    "volume group without the lvms tag",
			fixture: "fullreport-host-foreign-vg.json",
			wantVGs: []VG{{
				Name: "lvxb-foreign", UUID: "yu14OZ-SlrG-nl5G-cgxj-9O4G-nMJQ-J98mcH", Attr: "wz--n-",
				Size: 310378496, Free: 310378496, ExtentSize: 4194304, ExtentCount: 74, FreeCount: 74, PVCount: 1,
			}},
			wantPVs: []PV{{Name: "/dev/loop2", UUID: "z5YgVH-3pnZ-hWeX-aibx-vEb7-3NAR-eY1xd7", VGName: "lvxb-foreign",
				Size: 310378496, Free: 310378496, DevSize: 314572800, Attr: "a--", DeviceID: "/tmp/lvx/d3.img",
				DeviceIDType: "loop_file"}},
		},
		{name: "empty devices file", fixture: "fullreport-host-empty.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := ParseReport(readFixture(t, tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rep.VGs, tc.wantVGs) {
				t.Errorf("VGs:\n got %+v\nwant %+v", rep.VGs, tc.wantVGs)
			}
			if !reflect.DeepEqual(rep.PVs, tc.wantPVs) {
				t.Errorf("PVs:\n got %+v\nwant %+v", rep.PVs, tc.wantPVs)
			}
			if len(rep.LVs) != 0 {
				t.Errorf("LVs = %+v, want none", rep.LVs)
			}
		})
	}
}

func TestReport_Lookups(t *testing.T) {
	rep, err := ParseReport(readFixture(t, "fullreport-host-vg-and-orphan.json"))
	if err != nil {
		t.Fatal(err)
	}
	vg, ok := rep.VG("lvxa-vg1")
	if !ok || !vg.HasTag(OwnerTag) {
		t.Errorf("VG lvxa-vg1 = %+v, %v; want it found with tag %s", vg, ok, OwnerTag)
	}
	if _, ok := rep.VG("missing"); ok {
		t.Error("VG missing found")
	}
	var names []string
	for _, p := range rep.PVsOf("lvxa-vg1") {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, ","); got != "/dev/loop0,/dev/loop1" {
		t.Errorf("PVsOf = %s", got)
	}
	if pv, ok := rep.PV("/dev/loop3"); !ok || pv.VGName != "" {
		t.Errorf("orphan PV = %+v, %v", pv, ok)
	}
}

func TestParseReport_Errors(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr string
	}{
		{"not JSON", "  Volume group not found", "parse lvm JSON report"},
		{"truncated", `{"report":[{"vg":[{"vg_name":"a"`, "parse lvm JSON report"},
		{"bad size", `{"report":[{"vg":[{"vg_name":"a","vg_size":"12x"}]}]}`, `field vg_size: "12x" is not a number`},
		{"value of the wrong type", `{"report":[{"pv":[{"pv_name":1}]}]}`, "parse lvm JSON report"},
		{"negative free", `{"report":[{"pv":[{"pv_name":"/dev/a","pv_free":"-1"}]}]}`, `field pv_free: "-1" is not a number`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseReport([]byte(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseReport_LVsAndSegments(t *testing.T) {
	// The shape of a thin pool in fullreport (hidden LVs in brackets, seg fields in the seg subreport).
	input := `{"report":[{"vg":[{"vg_name":"vg1","vg_tags":"lvms,other","vg_size":"1069547520","vg_free":"0"}],
	"lv":[{"lv_name":"pool","lv_uuid":"U1","vg_name":"vg1","lv_size":"960495616","lv_attr":"twi-a-tz--","data_percent":"0.00","metadata_percent":"10.94","lv_metadata_size":"4194304","lv_layout":"thin,pool","lv_role":"private","lv_tags":"lvms"},
	      {"lv_name":"[pool_tdata]","lv_uuid":"U2","vg_name":"vg1","lv_size":"960495616","lv_attr":"Twi-ao----","lv_layout":"linear","lv_role":"private,thin,pool,data"},
	      {"lv_name":"vol","lv_uuid":"U3","vg_name":"vg1","lv_size":"104857600","lv_attr":"Vwi-a-tz--","pool_lv":"pool","lv_layout":"thin,sparse","lv_role":"public"}],
	"seg":[{"lv_uuid":"U1","segtype":"thin-pool","chunk_size":"65536","stripes":"1"},{"lv_uuid":"U3","segtype":"thin","chunk_size":"0","stripes":"0"}]}]}`
	rep, err := ParseReport([]byte(input))
	if err != nil {
		t.Fatal(err)
	}
	pool, ok := rep.LV("vg1", "pool")
	if !ok || !pool.IsThinPool() || !pool.Active() || pool.ChunkSize != 65536 || pool.SegType != "thin-pool" ||
		pool.MetadataPercent != "10.94" || pool.MetadataSize != 4194304 {
		t.Errorf("pool = %+v", pool)
	}
	tdata, ok := rep.LV("vg1", "pool_tdata")
	if !ok || !tdata.IsPrivate() {
		t.Errorf("hidden pool data LV = %+v, %v; want it found without brackets and private", tdata, ok)
	}
	vol, _ := rep.LV("vg1", "vol")
	if !vol.IsThinVolume() || vol.PoolLV != "pool" || vol.IsPrivate() {
		t.Errorf("thin volume = %+v", vol)
	}
	if got := len(rep.LVsOf("vg1")); got != 3 {
		t.Errorf("LVsOf = %d, want 3", got)
	}
}

func FuzzParseReport(f *testing.F) {
	for _, name := range []string{"fullreport-host-vg-and-orphan.json", "fullreport-host-foreign-vg.json", "fullreport-host-empty.json"} {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte(`{"report":[{"lv":[{"lv_name":"[","lv_size":"1.5"}],"seg":[{"lv_uuid":"","chunk_size":"x"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := ParseReport(data)
		if err == nil && rep == nil {
			t.Fatal("nil report without error")
		}
	})
}
