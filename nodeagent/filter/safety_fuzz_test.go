package filter

import (
	"fmt"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/selector"
)

// FuzzSafety builds a node from the fuzzer's bytes (up to eight devices, each with a type, a size and any
// of: mounted, read-only, a file system, LUKS, an LVM label of a foreign volume group, a child, held open,
// named by a PersistentVolume) and runs the filters for a volume group that selects everything. Property:
// no device anyone else may be using is ever offered as new, and every excluded device has a reason.
func FuzzSafety(f *testing.F) {
	f.Add([]byte{0, 0xff, 0, 1, 0xff, 1, 2, 0xff, 2})
	f.Add([]byte{0, 0xff, 0x80, 0, 0xff, 0x40, 0, 0xff, 0x20, 0, 0xff, 0x10})
	f.Add([]byte{2, 0x10, 3, 0, 0xff, 4, 1, 0xff, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		types := []string{blockdev.TypeDisk, blockdev.TypePart, blockdev.TypeLoop, blockdev.TypeLVM, "rom"}
		var devs []blockdev.Device
		report := &lvm.Report{}
		referenced := map[string]string{}
		for i := 0; i+2 < len(data) && len(devs) < 8; i += 3 {
			typ, size, flags := data[i], data[i+1], data[i+2]
			d := blockdev.Device{KName: fmt.Sprintf("/dev/sd%c", 'a'+len(devs)), Type: types[int(typ)%len(types)], Size: uint64(size) << 24}
			d.Name, d.Path = d.KName, d.KName
			if flags&1 != 0 {
				d.MountPoints = []string{"/mnt/x"}
			}
			if flags&2 != 0 {
				d.ReadOnly = true
			}
			if flags&4 != 0 {
				d.FSType, d.Signatures = "ext4", []string{"ext4"}
			}
			if flags&8 != 0 {
				d.FSType, d.Signatures = "crypto_LUKS", []string{"crypto_LUKS"}
			}
			if flags&16 != 0 {
				d.FSType, d.Signatures = "LVM2_member", []string{"LVM2_member"}
				report.PVs = append(report.PVs, lvm.PV{Name: d.KName, VGName: "someone-elses"})
			}
			if flags&32 != 0 && len(devs) > 0 {
				devs[len(devs)-1].Children = append(devs[len(devs)-1].Children, d.KName)
			}
			if flags&64 != 0 {
				d.Busy = "open: device or resource busy"
			}
			if flags&128 != 0 {
				referenced[d.KName] = "local-pv"
			}
			devs = append(devs, d)
		}
		report.VGs = append(report.VGs, lvm.VG{Name: "someone-elses"})
		inv := blockdev.NewInventory(devs, "")
		results := Run(Input{Inventory: inv, Report: report, Scoped: true, ReferencedBy: referenced,
			VolumeGroups: []VolumeGroup{{Name: "vg1", Selector: selector.All()}}})
		for _, r := range results {
			for _, c := range r.New {
				d := c.Device
				switch {
				case d.Mounted(), d.ReadOnly, len(d.Children) > 0, d.Busy != "", referenced[d.KName] != "",
					d.HasSignature("ext4"), d.HasSignature("crypto_LUKS"), d.HasSignature("LVM2_member") && !c.Orphan:
					t.Fatalf("%s (%+v) offered as new for %s", d.KName, *d, r.Name)
				}
			}
			for _, e := range r.Excluded {
				if len(e.Reasons) == 0 {
					t.Fatalf("%s excluded without a reason", e.KName)
				}
			}
		}
	})
}
