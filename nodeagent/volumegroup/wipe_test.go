package volumegroup

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// dmsetup answers `dmsetup info -o open` with the open count of each device-mapper name; every other
// command fails (nothing may be wiped in these tests).
type dmsetup map[string]string

func (d dmsetup) Execute(_ context.Context, cmd lvm.Command) (lvm.Result, error) {
	if len(cmd.Argv) > 0 && cmd.Argv[0] == "dmsetup" && cmd.Argv[1] == "info" {
		return lvm.Result{Stdout: []byte(d[cmd.Argv[len(cmd.Argv)-1]] + "\n")}, nil
	}
	return lvm.Result{ExitCode: 1, Stderr: []byte("unexpected command " + strings.Join(cmd.Argv, " "))}, nil
}

// A device-mapper device built on the disk that someone holds open (a VM, a mounted file system in another
// namespace) stops a forced wipe; one nobody opens does not. (The host has no device-mapper: the open count
// is what dmsetup would print.)
func TestUnsafeToWipe_OpenDeviceMapperHolder(t *testing.T) {
	for _, tc := range []struct {
		open string
		want string
	}{
		{"1", "/dev/dm-3 (/dev/mapper/old-data) is open 1 time(s)"},
		{"0", ""},
		{"garbage", "open count of /dev/dm-3 cannot be read"},
	} {
		disk := blockdev.Device{KName: "/dev/sdb", Name: "/dev/sdb", Path: "/dev/sdb", Type: blockdev.TypeDisk, Children: []string{"/dev/dm-3"}}
		dm := blockdev.Device{KName: "/dev/dm-3", Name: "/dev/mapper/old-data", Path: "/dev/mapper/old-data", Type: blockdev.TypeLVM}
		inv := blockdev.NewInventory([]blockdev.Device{disk, dm}, "")
		p := &vgPass{e: &Engine{Runner: lvm.Runner{Exec: dmsetup{"/dev/mapper/old-data": tc.open}}},
			in: Input{Inventory: inv, Report: &lvm.Report{}}, vg: &desired.VolumeGroup{Name: "vg1"}}
		d, _ := inv.Get("/dev/sdb")
		got := p.unsafeToWipe(d)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("open count %q: %q, want %q", tc.open, got, tc.want)
		}
	}
}

// descendants lists every device built on a disk once, deepest first, even when a device-mapper device
// spans two of its partitions, and skips children lsblk named but the inventory lacks.
func TestDescendants_SharedAndMissingChildren(t *testing.T) {
	inv := blockdev.NewInventory([]blockdev.Device{
		{KName: "/dev/sda", Type: blockdev.TypeDisk, Children: []string{"/dev/sda1", "/dev/sda2"}},
		{KName: "/dev/sda1", Type: blockdev.TypePart, Children: []string{"/dev/dm-0"}},
		{KName: "/dev/sda2", Type: blockdev.TypePart, Children: []string{"/dev/dm-0", "/dev/dm-9"}},
		{KName: "/dev/dm-0", Type: blockdev.TypeLVM},
	}, t.TempDir())
	disk, _ := inv.Get("/dev/sda")
	var got []string
	for _, d := range descendants(inv, disk) {
		got = append(got, d.KName)
	}
	if want := []string{"/dev/dm-0", "/dev/sda1", "/dev/sda2"}; !slices.Equal(got, want) {
		t.Errorf("descendants = %v, want %v", got, want)
	}
}

// poolsOf: a volume group's deletion removes the thin pools LVMS made (its owner tag, or the name of one of
// the volume group's thin device classes) and nothing else: not someone else's pool, not a volume that
// happens to carry the tag or a pool's name.
func TestPoolsOf(t *testing.T) {
	const vg = "vg1"
	rep := &lvm.Report{LVs: []lvm.LV{
		{VGName: vg, Name: "tagged", Attr: "twi-a-tz--", Tags: []string{lvm.OwnerTag}},
		{VGName: vg, Name: "pool0", Attr: "twi-a-tz--"},
		{VGName: vg, Name: "theirs", Attr: "twi-a-tz--"},
		{VGName: vg, Name: "pool1", Attr: "-wi-a-----"},
		{VGName: vg, Name: "vol", Attr: "Vwi-a-tz--", Tags: []string{lvm.OwnerTag}},
		{VGName: "vg2", Name: "pool0", Attr: "twi-a-tz--", Tags: []string{lvm.OwnerTag}},
	}}
	p := &vgPass{vg: &desired.VolumeGroup{Name: vg, ThinPools: []desired.ThinPool{{Name: "pool0"}, {Name: "pool1"}}}}
	if got, want := p.poolsOf(vg, rep), []string{"tagged", "pool0"}; !slices.Equal(got, want) {
		t.Errorf("pools of %s = %v, want %v", vg, got, want)
	}
}
