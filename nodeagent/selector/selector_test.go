package selector

import (
	"strings"
	"testing"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
)

func testInventory() *blockdev.Inventory {
	return blockdev.NewInventory([]blockdev.Device{
		{KName: "/dev/sdb", Name: "/dev/sdb", Type: "disk", Size: 200 << 30, Rotational: true, Serial: "S1", WWN: "0x5000c5",
			Model: "ST2000NM", Vendor: "ATA     ", Links: []string{"/dev/disk/by-id/wwn-0x5000c5"}},
		{KName: "/dev/nvme0n1", Name: "/dev/nvme0n1", Type: "disk", Size: 50 << 30, Serial: "N1"},
		{KName: "/dev/dm-6", Name: "/dev/mapper/luks-7a3c", Type: "crypt", Size: 500 << 30},
		{KName: "/dev/sda1", Name: "/dev/sda1", Type: "part", Size: 1 << 20, PartLabel: "BIOS-BOOT"},
	}, "/nonexistent")
}

func req(key lvmv2.DeviceSelectorKey, op lvmv2.DeviceSelectorOperator, values ...string) lvmv2.DeviceSelectorRequirement {
	return lvmv2.DeviceSelectorRequirement{Key: key, Operator: op, Values: values}
}

func terms(ts ...[]lvmv2.DeviceSelectorRequirement) lvmv2.DeviceSelector {
	var ds lvmv2.DeviceSelector
	for _, t := range ts {
		ds.DeviceSelectorTerms = append(ds.DeviceSelectorTerms, lvmv2.DeviceSelectorTerm{MatchExpressions: t})
	}
	return ds
}

func exprs(rs ...lvmv2.DeviceSelectorRequirement) []lvmv2.DeviceSelectorRequirement { return rs }

func TestSelector_V2(t *testing.T) {
	inv := testInventory()
	tests := []struct {
		name      string
		sel       lvmv2.DeviceSelector
		device    string
		want      Match
		wantWhy   string // substring of Explanation
		wantNamed []string
	}{
		{
			name: "kname In picks the device by name", device: "/dev/sdb",
			sel:  terms(exprs(req(lvmv2.KeyKName, lvmv2.OpIn, "/dev/sdb"))),
			want: Match{Selected: true, Explicit: true}, wantNamed: []string{"/dev/sdb"},
		},
		{
			name: "kname accepts the /dev/mapper name", device: "/dev/dm-6",
			sel:  terms(exprs(req(lvmv2.KeyKName, lvmv2.OpIn, "/dev/mapper/luks-7a3c"))),
			want: Match{Selected: true, Explicit: true, Path: "/dev/mapper/luks-7a3c"},
		},
		{
			name: "path In with a by-id link records the link", device: "/dev/sdb",
			sel:  terms(exprs(req(lvmv2.KeyPath, lvmv2.OpIn, "/dev/disk/by-id/wwn-0x5000c5"))),
			want: Match{Selected: true, Explicit: true, Path: "/dev/disk/by-id/wwn-0x5000c5"},
		},
		{
			name: "Any picks every device as a wildcard", device: "/dev/sda1",
			sel:  terms(exprs(req(lvmv2.KeyKName, lvmv2.OpAny))),
			want: Match{Selected: true, Wildcard: true},
		},
		{
			name: "terms are ORed: the second term picks", device: "/dev/nvme0n1",
			sel: terms(exprs(req(lvmv2.KeyKName, lvmv2.OpIn, "/dev/sdb")),
				exprs(req(lvmv2.KeySerial, lvmv2.OpIn, "N1"))),
			want: Match{Selected: true, Term: 2},
		},
		{
			name: "expressions are ANDed: size fails, a near miss with the reason", device: "/dev/nvme0n1",
			sel:  terms(exprs(req(lvmv2.KeyRotational, lvmv2.OpIn, "false"), req(lvmv2.KeySize, lvmv2.OpGt, "100Gi"))),
			want: Match{Partial: true}, wantWhy: "/dev/nvme0n1 has size 50Gi, not greater than 100Gi",
		},
		{
			name: "Lt on size", device: "/dev/nvme0n1",
			sel:  terms(exprs(req(lvmv2.KeySize, lvmv2.OpLt, "100Gi"))),
			want: Match{Selected: true},
		},
		{
			name: "size In matches the exact size", device: "/dev/sdb",
			sel:  terms(exprs(req(lvmv2.KeySize, lvmv2.OpIn, "200Gi"))),
			want: Match{Selected: true},
		},
		{
			name: "not named at all: no near miss", device: "/dev/nvme0n1",
			sel:  terms(exprs(req(lvmv2.KeyKName, lvmv2.OpIn, "/dev/sdb"))),
			want: Match{}, wantWhy: "/dev/nvme0n1 has kname /dev/nvme0n1, not one of [/dev/sdb]",
		},
		{
			name: "NotIn excludes", device: "/dev/sdb",
			sel:  terms(exprs(req(lvmv2.KeyType, lvmv2.OpIn, "disk"), req(lvmv2.KeyKName, lvmv2.OpNotIn, "/dev/sdb"))),
			want: Match{Partial: true}, wantWhy: "/dev/sdb has kname /dev/sdb, which is excluded by NotIn",
		},
		{
			name: "vendor is compared without lsblk's padding", device: "/dev/sdb",
			sel:  terms(exprs(req(lvmv2.KeyVendor, lvmv2.OpIn, "ATA"), req(lvmv2.KeyModel, lvmv2.OpIn, "ST2000NM"), req(lvmv2.KeyWWN, lvmv2.OpExists))),
			want: Match{Selected: true},
		},
		{
			name: "DoesNotExist on partlabel", device: "/dev/sda1",
			sel:  terms(exprs(req(lvmv2.KeyType, lvmv2.OpIn, "part"), req(lvmv2.KeyPartLabel, lvmv2.OpDoesNotExist))),
			want: Match{Partial: true}, wantWhy: "/dev/sda1 has partlabel BIOS-BOOT",
		},
		{
			name: "the status names the term that picked the device", device: "/dev/sdb",
			sel:  terms(exprs(req(lvmv2.KeyWWN, lvmv2.OpIn, "no-such-wwn")), exprs(req(lvmv2.KeyKName, lvmv2.OpIn, "/dev/sdb"))),
			want: Match{Selected: true, Explicit: true, Term: 2}, wantNamed: []string{"/dev/sdb"},
		},
		{
			name: "Exists fails on an unreported property", device: "/dev/nvme0n1",
			sel:  terms(exprs(req(lvmv2.KeyWWN, lvmv2.OpExists)), exprs(req(lvmv2.KeyRotational, lvmv2.OpIn, "true"))),
			want: Match{}, wantWhy: "term 1: /dev/nvme0n1 has no wwn; term 2: /dev/nvme0n1 has rotational false, not one of [true]",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := FromV2(tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := inv.Get(tc.device)
			got := s.Match(inv, d)
			why := got.Explanation
			got.Explanation = ""
			if tc.want.Selected && tc.want.Term == 0 {
				tc.want.Term = 1 // one-term selectors pick by their first term
			}
			if got != tc.want {
				t.Errorf("match = %+v, want %+v (explanation %q)", got, tc.want, why)
			}
			if !strings.Contains(why, tc.wantWhy) || (tc.wantWhy == "" && why != "") {
				t.Errorf("explanation = %q, want %q", why, tc.wantWhy)
			}
			if tc.wantNamed != nil {
				var named []string
				for _, n := range s.NamedPaths() {
					named = append(named, n.Path)
				}
				if strings.Join(named, ",") != strings.Join(tc.wantNamed, ",") {
					t.Errorf("named paths = %v, want %v", named, tc.wantNamed)
				}
			}
		})
	}
}

func TestFromV2_Invalid(t *testing.T) {
	tests := []struct {
		name    string
		sel     lvmv2.DeviceSelector
		wantErr string
	}{
		{"no terms", lvmv2.DeviceSelector{}, "deviceSelectorTerms is empty"},
		{"term without expressions", terms(exprs()), "deviceSelectorTerms[0] has no matchExpressions"},
		{"unknown key", terms(exprs(req("colour", lvmv2.OpIn, "red"))), `deviceSelectorTerms[0].matchExpressions[0]: unknown key "colour": use one of kname, path, serial`},
		{"unknown operator", terms(exprs(req(lvmv2.KeyKName, "Like", "/dev/sd*"))), `unknown operator "Like": use one of In, NotIn`},
		{"In without values", terms(exprs(req(lvmv2.KeyKName, lvmv2.OpIn))), "operator In needs at least one value"},
		{"Any with values", terms(exprs(req(lvmv2.KeyKName, lvmv2.OpAny, "x"))), "operator Any takes no values"},
		{"Gt on serial", terms(exprs(req(lvmv2.KeySerial, lvmv2.OpGt, "1"))), "operator Gt only applies to key size"},
		{"Gt with two values", terms(exprs(req(lvmv2.KeySize, lvmv2.OpGt, "1Gi", "2Gi"))), "needs exactly one value"},
		{"bad quantity", terms(exprs(req(lvmv2.KeySize, lvmv2.OpIn, "10 gigs"))), `size value "10 gigs" is not a quantity`},
		{"bad rotational", terms(exprs(req(lvmv2.KeyRotational, lvmv2.OpIn, "yes"))), `rotational value "yes" must be`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromV2(tc.sel)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestSelector_V1(t *testing.T) {
	inv := testInventory()
	sdb, _ := inv.Get("/dev/sdb")
	nvme, _ := inv.Get("/dev/nvme0n1")
	s := FromV1(&lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/disk/by-id/wwn-0x5000c5"}, OptionalPaths: []lvmv1.DevicePath{"/dev/missing"}})
	if m := s.Match(inv, sdb); !m.Selected || !m.Explicit || m.Path != "/dev/disk/by-id/wwn-0x5000c5" {
		t.Errorf("path match = %+v", m)
	}
	if m := s.Match(inv, nvme); m.Selected || m.Partial || m.Explanation != "/dev/nvme0n1 is not one of the device selector's paths" {
		t.Errorf("not in paths = %+v", m)
	}
	want := []NamedPath{{Path: "/dev/disk/by-id/wwn-0x5000c5", Required: true}, {Path: "/dev/missing", Optional: true}}
	if got := s.NamedPaths(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("named = %+v", got)
	}
	if !s.Explicit() || !s.HasPaths() {
		t.Error("a paths selector is explicit")
	}
	all := FromV1(nil)
	if m := all.Match(inv, nvme); !m.Selected || !m.Wildcard || all.Explicit() || !all.IsAll() {
		t.Errorf("no selector = %+v", m)
	}
}

func TestSelector_Explicit(t *testing.T) {
	named, _ := FromV2(terms(exprs(req(lvmv2.KeyPath, lvmv2.OpIn, "/dev/sdb"), req(lvmv2.KeySize, lvmv2.OpGt, "1Gi"))))
	pattern, _ := FromV2(terms(exprs(req(lvmv2.KeyPath, lvmv2.OpIn, "/dev/sdb")), exprs(req(lvmv2.KeyType, lvmv2.OpIn, "disk"))))
	if !named.Explicit() || pattern.Explicit() {
		t.Errorf("explicit: named %v, with a pattern term %v", named.Explicit(), pattern.Explicit())
	}
}

func FuzzSelector(f *testing.F) {
	f.Add("kname", "In", "/dev/sdb", uint64(1<<30))
	f.Add("size", "Gt", "100Gi", uint64(0))
	f.Add("rotational", "In", "true", uint64(5))
	f.Fuzz(func(t *testing.T, key, op, value string, size uint64) {
		var values []string
		if value != "" {
			values = []string{value}
		}
		s, err := FromV2(terms(exprs(req(lvmv2.DeviceSelectorKey(key), lvmv2.DeviceSelectorOperator(op), values...))))
		if err != nil {
			return
		}
		d := &blockdev.Device{KName: "/dev/sdz", Name: value, Size: size, Serial: value}
		m := s.Match(blockdev.NewInventory([]blockdev.Device{*d}, "/nonexistent"), d)
		if m.Selected && m.Explanation != "" {
			t.Fatalf("selected with an explanation: %+v", m)
		}
	})
}
