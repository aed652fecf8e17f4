package filter

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev/blockdevtest"
	"github.com/lvms-dev/lvms/nodeagent/selector"
)

func summary(r Result) (included []string, excluded map[string]string) {
	for _, c := range r.Members {
		included = append(included, "member "+c.KName())
	}
	for _, c := range r.New {
		s := "new " + c.KName()
		if c.Orphan {
			s += " (orphan PV)"
		}
		included = append(included, s)
	}
	excluded = map[string]string{}
	for _, e := range r.Excluded {
		excluded[e.KName] = strings.Join(e.Codes(), ",")
	}
	return included, excluded
}

func v2sel(t *testing.T, terms ...[]lvmv2.DeviceSelectorRequirement) *selector.Selector {
	t.Helper()
	var ds lvmv2.DeviceSelector
	for _, tm := range terms {
		ds.DeviceSelectorTerms = append(ds.DeviceSelectorTerms, lvmv2.DeviceSelectorTerm{MatchExpressions: tm})
	}
	s, err := selector.FromV2(ds)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func any() []lvmv2.DeviceSelectorRequirement {
	return []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpAny}}
}

func knameIn(v ...string) []lvmv2.DeviceSelectorRequirement {
	return []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: v}}
}

// The host-loops fixture is real output: loop devices on this host, one agent's devices file.
func TestRun_HostLoops(t *testing.T) {
	inv, rep := blockdevtest.HostLoops(t)
	res := Run(Input{Inventory: inv, Report: rep, Scoped: true, VolumeGroups: []VolumeGroup{
		{Name: "rec-vg1", Selector: selector.All()},
	}})
	included, excluded := summary(res[0])
	if want := []string{"member /dev/loop2", "new /dev/loop0p4", "new /dev/loop1", "new /dev/loop10 (orphan PV)"}; !reflect.DeepEqual(included, want) {
		t.Errorf("included = %v, want %v", included, want)
	}
	want := map[string]string{
		"/dev/loop0":   "HasChildren",
		"/dev/loop0p1": "TooSmall,ReservedPartition",
		"/dev/loop0p2": "TooSmall,ReservedPartition,ForeignSignature",
		"/dev/loop0p3": "Mounted",
		"/dev/loop3":   "OtherVolumeGroup",
		"/dev/loop4":   "ReadOnly",
		"/dev/loop5":   "ReadOnly",
		"/dev/loop6":   "TooSmall",
		"/dev/loop7":   "KubeletLoopDevice",
		"/dev/loop8":   "Mounted",
		"/dev/loop9":   "ForeignSignature",
		"/dev/vda":     "Mounted",
		"/dev/zram0":   "TooSmall",
	}
	if !reflect.DeepEqual(excluded, want) {
		t.Errorf("excluded:\n got %v\nwant %v", excluded, want)
	}
	if !res[0].Exists {
		t.Error("rec-vg1 exists in the report")
	}
}

func TestRun_Messages(t *testing.T) {
	inv, rep := blockdevtest.HostLoops(t)
	res := Run(Input{Inventory: inv, Report: rep, Scoped: true, VolumeGroups: []VolumeGroup{{Name: "rec-vg1", Selector: selector.All()}}})
	msgs := map[string]string{}
	for _, e := range res[0].Excluded {
		msgs[e.KName] = strings.Join(e.Messages(), " | ")
	}
	want := map[string]string{
		"/dev/loop0":   "/dev/loop0 has partitions or holders (/dev/loop0p1, /dev/loop0p2, /dev/loop0p3, /dev/loop0p4) and cannot be used as a whole",
		"/dev/loop0p1": "/dev/loop0p1 is 2 MiB, smaller than the minimum of 128 MiB for a physical volume | /dev/loop0p1 was used as a boot partition and cannot be used",
		"/dev/loop0p3": "/dev/loop0p3 is mounted at /tmp/lvx/rec/mnt and cannot be used",
		"/dev/loop3":   "/dev/loop3 carries an LVM label but is not in this node agent's LVM devices file: it belongs to another node's agent or to LVM outside LVMS",
		"/dev/loop4":   "/dev/loop4 is read-only and cannot be used",
		"/dev/loop7":   "/dev/loop7 is a loop device backing a Kubernetes volume (/var/lib/lvms-test/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-0b1c/dev) and cannot be used",
		"/dev/loop8":   "/dev/loop8 is used as swap and cannot be used",
		"/dev/loop9":   "/dev/loop9 has a ext4 filesystem signature and cannot be used; to use it, wipe it (wipefs --all /dev/loop9) or set forceWipeDevicesAndDestroyAllData on a selector that names it",
	}
	for k, w := range want {
		if msgs[k] != w {
			t.Errorf("%s:\n got %q\nwant %q", k, msgs[k], w)
		}
	}
}

// The server fixture covers what loop devices cannot: multipath, md RAID, LVs, crypt, a suspended device,
// a CD-ROM, boot partitions by type, a foreign volume group that LVM reports (no devices file).
func TestRun_Server(t *testing.T) {
	inv, rep, _ := blockdevtest.Server(t)
	res := Run(Input{Inventory: inv, Report: rep, VolumeGroups: []VolumeGroup{
		{Name: "vg1", Selector: v2sel(t, knameIn("/dev/mapper/some-encrypted-device", "/dev/mapper/luks-7a3c"), knameIn("/dev/nvme1n1"))},
		{Name: "othervg", Selector: v2sel(t, any())},
	}})
	included, excluded := summary(res[0])
	if want := []string{"member /dev/nvme1n1", "new /dev/dm-6"}; !reflect.DeepEqual(included, want) {
		t.Errorf("vg1 included = %v, want %v", included, want)
	}
	if want := map[string]string{"/dev/mapper/some-encrypted-device": "NotFound"}; !reflect.DeepEqual(excluded, want) {
		t.Errorf("vg1 excluded = %v, want %v", excluded, want)
	}
	included, excluded = summary(res[1])
	if want := []string{"new /dev/dm-0", "new /dev/md127", "new /dev/nvme0n1"}; !reflect.DeepEqual(included, want) {
		t.Errorf("othervg included = %v, want %v", included, want)
	}
	want := map[string]string{
		"/dev/dm-6":    "UsedByOtherVolumeGroup",
		"/dev/loop0":   "KubeletLoopDevice",
		"/dev/nvme1n1": "UsedByOtherVolumeGroup",
		"/dev/nvme2n1": "OtherVolumeGroup",
		"/dev/nvme3n1": "Suspended",
		"/dev/sda":     "HasChildren",
		"/dev/sda1":    "TooSmall,ReservedPartition",
		"/dev/sda2":    "TooSmall,ReservedPartition,ForeignSignature",
		"/dev/sda3":    "ReservedPartition,Mounted",
		"/dev/sda4":    "Mounted",
		"/dev/sdb":     "MultipathComponent",
		"/dev/sdc":     "MultipathComponent",
		"/dev/sdd":     "HasChildren",
		"/dev/sde":     "HasChildren",
		"/dev/sdf":     "HasChildren",
		"/dev/sr0":     "UnsupportedType",
		"/dev/zram0":   "Mounted",
	}
	if !reflect.DeepEqual(excluded, want) {
		t.Errorf("othervg excluded:\n got %v\nwant %v", excluded, want)
	}
	var sentences []string
	for _, e := range res[1].Excluded {
		if e.KName == "/dev/dm-6" || e.KName == "/dev/sdb" || e.KName == "/dev/nvme2n1" || e.KName == "/dev/sr0" || e.KName == "/dev/nvme3n1" {
			sentences = append(sentences, e.Messages()...)
		}
	}
	wantSentences := []string{
		"/dev/dm-6 is already being used by vg1 and cannot be used by a wildcard (Any) volumeGroup",
		"/dev/nvme2n1 is a physical volume of volume group data, which LVMS does not manage",
		"/dev/nvme3n1 is in a suspended state and cannot be used; resume it (dmsetup resume) first",
		"/dev/sdb is a path of multipath device /dev/mapper/mpatha; select /dev/mapper/mpatha instead",
		`/dev/sr0 has a device type of "rom", which cannot hold a physical volume`,
	}
	if !reflect.DeepEqual(sentences, wantSentences) {
		t.Errorf("sentences:\n got %q\nwant %q", sentences, wantSentences)
	}
}

func TestRun_ExplicitClaimsBeforeWildcard(t *testing.T) {
	inv, rep := blockdevtest.HostLoops(t)
	// The wildcard volume group comes first in spec order, but the second names /dev/loop1 explicitly.
	res := Run(Input{Inventory: inv, Report: rep, Scoped: true, VolumeGroups: []VolumeGroup{
		{Name: "wild", Selector: v2sel(t, any())},
		{Name: "named", Selector: v2sel(t, knameIn("/dev/loop1"))},
	}})
	inc, _ := summary(res[1])
	if want := []string{"new /dev/loop1"}; !reflect.DeepEqual(inc, want) {
		t.Errorf("named included = %v, want %v", inc, want)
	}
	inc, exc := summary(res[0])
	if exc["/dev/loop1"] != "UsedByOtherVolumeGroup" || exc["/dev/loop2"] != "UsedByOtherVolumeGroup" {
		t.Errorf("wild excluded = %v; want loop1 (claimed by named) and loop2 (in rec-vg1) used by other volume groups", exc)
	}
	if want := []string{"new /dev/loop0p4", "new /dev/loop10 (orphan PV)"}; !reflect.DeepEqual(inc, want) {
		t.Errorf("wild included = %v, want %v", inc, want)
	}
}

func TestRun_V1Paths(t *testing.T) {
	inv, rep := blockdevtest.HostLoops(t)
	tests := []struct {
		name         string
		sel          *lvmv1.DeviceSelector
		wantMissing  []string
		wantNoOpt    bool
		wantIncluded []string
		wantExcluded map[string]string
	}{
		{
			name:         "required path missing is named",
			sel:          &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/disk/by-id/virtio-lvms-empty", "/dev/disk/by-id/gone"}},
			wantMissing:  []string{"/dev/disk/by-id/gone"},
			wantIncluded: []string{"new /dev/loop1"},
			wantExcluded: map[string]string{"/dev/disk/by-id/gone": "NotFound"},
		},
		{
			name:         "no optional path resolves",
			sel:          &lvmv1.DeviceSelector{OptionalPaths: []lvmv1.DevicePath{"/dev/nope1", "/dev/nope2"}},
			wantNoOpt:    true,
			wantExcluded: map[string]string{"/dev/nope1": "NotFound", "/dev/nope2": "NotFound"},
		},
		{
			name:         "a named device that fails a filter",
			sel:          &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/loop9"}, OptionalPaths: []lvmv1.DevicePath{"/dev/disk/by-partlabel/data2"}},
			wantIncluded: []string{"new /dev/loop0p4"},
			wantExcluded: map[string]string{"/dev/loop9": "ForeignSignature"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Run(Input{Inventory: inv, Report: rep, Scoped: true, VolumeGroups: []VolumeGroup{{Name: "vgx", Selector: selector.FromV1(tc.sel)}}})
			inc, exc := summary(res[0])
			if fmt.Sprint(res[0].MissingRequired) != fmt.Sprint(tc.wantMissing) || res[0].NoOptionalFound != tc.wantNoOpt {
				t.Errorf("missing = %v, no optional = %v", res[0].MissingRequired, res[0].NoOptionalFound)
			}
			if fmt.Sprint(inc) != fmt.Sprint(tc.wantIncluded) {
				t.Errorf("included = %v, want %v", inc, tc.wantIncluded)
			}
			if !reflect.DeepEqual(exc, tc.wantExcluded) {
				t.Errorf("excluded = %v, want %v", exc, tc.wantExcluded)
			}
			if c := res[0].New; len(c) > 0 && tc.sel.Paths != nil && !c[0].Match.Explicit {
				t.Error("a device named by paths must be explicit (wipe-eligible)")
			}
		})
	}
}

func TestRun_NotSelectedAndStatic(t *testing.T) {
	inv, rep := blockdevtest.HostLoops(t)
	near := v2sel(t, []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyType, Operator: lvmv2.OpIn, Values: []string{"loop"}},
		{Key: lvmv2.KeySize, Operator: lvmv2.OpGt, Values: []string{"400Mi"}}})
	res := Run(Input{Inventory: inv, Report: rep, Scoped: true, VolumeGroups: []VolumeGroup{
		{Name: "big", Selector: near},
		{Name: "rec-vg1", Selector: selector.All(), StaticDiscovery: true},
	}})
	var loop1 Excluded
	for _, e := range res[0].Excluded {
		if e.KName == "/dev/loop1" {
			loop1 = e
		}
	}
	if want := "not selected: /dev/loop1 has size 300Mi, not greater than 400Mi"; loop1.Has(lvmv2.ReasonNotSelected) == false || loop1.Messages()[0] != want {
		t.Errorf("loop1 in big = %+v, want %q", loop1, want)
	}
	if _, exc := summary(res[0]); exc["/dev/loop0p1"] != "" {
		t.Errorf("a partition is not a near miss of type In [loop]: %v", exc)
	}
	inc, exc := summary(res[1])
	if want := []string{"member /dev/loop2"}; !reflect.DeepEqual(inc, want) || exc["/dev/loop1"] != "StaticDiscovery" {
		t.Errorf("static: included %v, loop1 %q", inc, exc["/dev/loop1"])
	}
}

// TestRun_EveryReason proves each reason code of api/lvm/v2alpha1/conditions.go is produced, with a
// sentence that names the device.
func TestRun_EveryReason(t *testing.T) {
	loops, loopReport := blockdevtest.HostLoops(t)
	server, serverReport, _ := blockdevtest.Server(t)
	if d, ok := server.Get("/dev/nvme0n1"); ok {
		d.ProbeError = "read signatures: wipefs: Device or resource busy"
	}
	runs := []Input{
		{Inventory: loops, Report: loopReport, Scoped: true, VolumeGroups: []VolumeGroup{
			{Name: "rec-vg1", Selector: selector.All(), StaticDiscovery: true},
			{Name: "near", Selector: v2sel(t, []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyType, Operator: lvmv2.OpIn, Values: []string{"loop"}},
				{Key: lvmv2.KeyRotational, Operator: lvmv2.OpIn, Values: []string{"false"}}})},
			{Name: "named", Selector: v2sel(t, knameIn("/dev/does-not-exist"))},
		}},
		{Inventory: server, Report: serverReport, VolumeGroups: []VolumeGroup{
			{Name: "vg1", Selector: v2sel(t, knameIn("/dev/nvme1n1", "/dev/dm-4"))},
			{Name: "othervg", Selector: v2sel(t, any())},
		}},
	}
	seen := map[lvmv2.ReasonCode]string{}
	for _, in := range runs {
		for _, r := range Run(in) {
			for _, e := range r.Excluded {
				for _, reason := range e.Reasons {
					if !strings.Contains(reason.Message, e.KName) && reason.Code != lvmv2.ReasonLogicalVolume {
						t.Errorf("%s: %q does not name the device", reason.Code, reason.Message)
					}
					seen[reason.Code] = reason.Message
				}
			}
		}
	}
	for _, code := range []lvmv2.ReasonCode{lvmv2.ReasonNotFound, lvmv2.ReasonNotSelected, lvmv2.ReasonUnsupportedType,
		lvmv2.ReasonReadOnly, lvmv2.ReasonSuspended, lvmv2.ReasonTooSmall, lvmv2.ReasonReservedPartition, lvmv2.ReasonHasChildren,
		lvmv2.ReasonMounted, lvmv2.ReasonForeignSignature, lvmv2.ReasonOtherVolumeGroup, lvmv2.ReasonLogicalVolume,
		lvmv2.ReasonKubeletLoopDevice, lvmv2.ReasonMultipathComponent, lvmv2.ReasonUsedByOtherVolumeGroup, lvmv2.ReasonStaticDiscovery} {
		if seen[code] == "" {
			t.Errorf("no test produces %s", code)
		}
	}
	if want := "/dev/mapper/vg1-thin--pool--1 is a logical volume of vg1 (LVMS volumes cannot be physical volumes)"; !strings.Contains(seen[lvmv2.ReasonLogicalVolume], "is a logical volume of vg1") {
		t.Errorf("LogicalVolume = %q, want %q", seen[lvmv2.ReasonLogicalVolume], want)
	}
}

func TestSplitDMName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"vg1-thin--pool--1_tmeta", "vg1"},
		{"my--vg-lv", "my-vg"},
		{"vg1-thin--pool--1-tpool", "vg1"},
		{"noseparator", ""},
	}
	for _, tc := range tests {
		if got, _ := splitDMName(tc.in); got != tc.want {
			t.Errorf("splitDMName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
