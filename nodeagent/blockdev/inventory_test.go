package blockdev

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvm/lvmtest"
)

// replayHostLoops discovers the host-loops fixture: real lsblk, wipefs and blkid output recorded by
// testdata/record-host-loops.sh.
func replayHostLoops(t *testing.T) *Inventory {
	t.Helper()
	rp := lvmtest.Replay(t, filepath.Join("testdata", "host-loops", "session.json"), "record it with testdata/record-host-loops.sh")
	rp.AllowUnused = "only the inventory: the lvm2 report in the same recording is blockdevtest.HostLoops's"
	d := &Discoverer{Runner: lvm.Runner{Exec: rp}, Root: filepath.Join("testdata", "host-loops", "root")}
	inv, err := d.Discover(context.Background())
	if err != nil {
		t.Fatalf("discover with %s: %v", rp, err)
	}
	return inv
}

func TestDiscover_HostLoops(t *testing.T) {
	inv := replayHostLoops(t)
	tests := []struct {
		kname string
		check func(d *Device) string
	}{
		{"/dev/loop0", func(d *Device) string {
			return expect(d.Type == TypeLoop && d.Size == 512<<20 && reflect.DeepEqual(d.Children,
				[]string{"/dev/loop0p1", "/dev/loop0p2", "/dev/loop0p3", "/dev/loop0p4"}), "a loop disk with four partitions")
		}},
		{"/dev/loop0p1", func(d *Device) string {
			return expect(d.Type == TypePart && d.PartLabel == "BIOS-BOOT" && d.PartType == "21686148-6449-6e6f-744e-656564454649" &&
				reflect.DeepEqual(d.Parents, []string{"/dev/loop0"}), "BIOS boot partition label and type from blkid")
		}},
		{"/dev/loop0p2", func(d *Device) string {
			return expect(d.PartLabel == "EFI-SYSTEM" && d.FSType == "vfat", "EFI partition with vfat")
		}},
		{"/dev/loop0p3", func(d *Device) string {
			return expect(reflect.DeepEqual(d.MountPoints, []string{"/tmp/lvx/rec/mnt"}) && d.Mounted(), "mounted partition")
		}},
		{"/dev/loop0p4", func(d *Device) string {
			return expect(d.FSType == "" && d.PartLabel == "data2" && slices.Contains(d.Links, "/dev/disk/by-partlabel/data2"), "empty partition with a by-partlabel link")
		}},
		{"/dev/loop1", func(d *Device) string {
			return expect(d.FSType == "" && !d.ReadOnly && d.Links[0] == "/dev/disk/by-id/virtio-lvms-empty" && d.BackingFile == "/var/lib/lvms-test/b.img", "empty loop with a link")
		}},
		{"/dev/loop2", func(d *Device) string { return expect(d.FSType == SigLVM2, "our PV") }},
		{"/dev/loop3", func(d *Device) string { return expect(d.FSType == SigLVM2, "a foreign PV, seen by its signature only") }},
		{"/dev/loop4", func(d *Device) string { return expect(d.ReadOnly, "losetup -r") }},
		{"/dev/loop5", func(d *Device) string { return expect(d.ReadOnly, "blockdev --setro") }},
		{"/dev/loop6", func(d *Device) string { return expect(d.Size == 64<<20, "64 MiB") }},
		{"/dev/loop7", func(d *Device) string {
			return expect(d.BackingFile == "/var/lib/lvms-test/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-0b1c/dev", "kubelet back-file")
		}},
		{"/dev/loop8", func(d *Device) string { return expect(reflect.DeepEqual(d.MountPoints, []string{"[SWAP]"}), "swap") }},
		{"/dev/loop9", func(d *Device) string { return expect(d.FSType == "ext4" && d.ProbeError == "", "whole-disk ext4") }},
		{"/dev/loop10", func(d *Device) string { return expect(d.FSType == SigLVM2, "orphan PV") }},
	}
	for _, tc := range tests {
		t.Run(tc.kname, func(t *testing.T) {
			d, ok := inv.Get(tc.kname)
			if !ok {
				t.Fatalf("%s not discovered", tc.kname)
			}
			if msg := tc.check(d); msg != "" {
				t.Errorf("%s: %+v", msg, *d)
			}
		})
	}
	if d, ok := inv.Resolve("/dev/disk/by-id/virtio-lvms-ours"); !ok || d.KName != "/dev/loop2" {
		t.Errorf("resolve by-id link: %v, %v", d, ok)
	}
}

func expect(ok bool, what string) string {
	if ok {
		return ""
	}
	return "want " + what
}

// serverRunner answers lsblk and wipefs from the hand-written server fixture; wipefs answers only for the
// devices it is asked about, as the real command does.
type serverRunner struct {
	lsblk, wipefs []byte
	ran           []string
}

func (s *serverRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	s.ran = append(s.ran, name+" "+strings.Join(args, " "))
	switch name {
	case "lsblk":
		return s.lsblk, nil
	case "wipefs":
		var doc struct {
			Signatures []map[string]any `json:"signatures"`
		}
		if err := json.Unmarshal(s.wipefs, &doc); err != nil {
			return nil, err
		}
		var keep []map[string]any
		for _, sig := range doc.Signatures {
			if slices.Contains(args, "/dev/"+sig["device"].(string)) {
				keep = append(keep, sig)
			}
		}
		if len(keep) == 0 {
			return nil, nil
		}
		return json.Marshal(map[string]any{"signatures": keep})
	}
	return nil, fmt.Errorf("%s: not in the server fixture", name)
}

func serverInventory(t *testing.T) (*Inventory, *serverRunner) {
	t.Helper()
	dir := filepath.Join("testdata", "server")
	lsblk, err := os.ReadFile(filepath.Join(dir, "lsblk.json"))
	if err != nil {
		t.Fatal(err)
	}
	wipefs, err := os.ReadFile(filepath.Join(dir, "wipefs.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := &serverRunner{lsblk: lsblk, wipefs: wipefs}
	inv, err := (&Discoverer{Runner: r, Root: filepath.Join(dir, "root")}).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return inv, r
}

func TestDiscover_Server(t *testing.T) {
	inv, r := serverInventory(t)
	wantProbe := "wipefs --no-act --json /dev/dm-0 /dev/dm-6 /dev/loop0 /dev/md127 /dev/nvme0n1 /dev/nvme2n1 /dev/nvme3n1 /dev/sda1 /dev/sda2"
	if !slices.Contains(r.ran, wantProbe) {
		t.Errorf("probed %v, want %q: only unmounted leaf devices", r.ran, wantProbe)
	}
	mpath, _ := inv.Get("/dev/dm-0")
	if mpath.Type != TypeMpath || !reflect.DeepEqual(mpath.Parents, []string{"/dev/sdb", "/dev/sdc"}) || mpath.Name != "/dev/mapper/mpatha" ||
		!slices.Contains(mpath.Links, "/dev/disk/by-id/dm-uuid-mpath-3600a098038303053453f4d6a5a2d4b6a") {
		t.Errorf("multipath map = %+v; want both paths as parents", *mpath)
	}
	sdb, _ := inv.Get("/dev/sdb")
	if sdb.FSType != SigMpath || !reflect.DeepEqual(sdb.Children, []string{"/dev/dm-0"}) {
		t.Errorf("multipath path = %+v", *sdb)
	}
	md, _ := inv.Get("/dev/md127")
	if md.Type != "raid1" || !reflect.DeepEqual(md.Parents, []string{"/dev/sdd", "/dev/sde"}) {
		t.Errorf("md array = %+v", *md)
	}
	tpool, _ := inv.Get("/dev/dm-3")
	if !reflect.DeepEqual(tpool.Parents, []string{"/dev/dm-1", "/dev/dm-2"}) || len(tpool.Children) != 2 {
		t.Errorf("thin pool dm = %+v", *tpool)
	}
	if d, ok := inv.Resolve("/dev/mapper/luks-7a3c"); !ok || d.KName != "/dev/dm-6" || d.Type != TypeCrypt {
		t.Errorf("resolve /dev/mapper name: %+v", d)
	}
	if d, ok := inv.Resolve("/dev/disk/by-id/nvme-eui.36564630525003820025384500000001"); !ok || d.KName != "/dev/nvme0n1" {
		t.Errorf("resolve by-id: %+v", d)
	}
	if _, ok := inv.Resolve("/dev/disk/by-id/missing"); ok {
		t.Error("missing link resolved")
	}
	sda2, _ := inv.Get("/dev/sda2")
	if !reflect.DeepEqual(sda2.Signatures, []string{"vfat"}) {
		t.Errorf("sda2 signatures = %v, want [vfat] once", sda2.Signatures)
	}
	nvme3, _ := inv.Get("/dev/nvme3n1")
	if nvme3.State != "suspended" {
		t.Errorf("nvme3n1 state = %q", nvme3.State)
	}
}

func TestResolve_SymlinkOutsideDevDisk(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"dev/vgx"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "dev", "loop1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../loop1", filepath.Join(root, "dev", "vgx", "lv")); err != nil {
		t.Fatal(err)
	}
	inv := NewInventory([]Device{{KName: "/dev/loop1", Name: "/dev/loop1", Type: TypeLoop}}, root)
	if d, ok := inv.Resolve("/dev/vgx/lv"); !ok || d.KName != "/dev/loop1" {
		t.Errorf("resolve = %v, %v", d, ok)
	}
	if _, ok := inv.Resolve("relative/path"); ok {
		t.Error("relative path resolved")
	}
}

// legacyRunner is util-linux before 2.37: no MOUNTPOINTS column, string booleans.
type legacyRunner struct{ calls []string }

func (l *legacyRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := name + " " + strings.Join(args, " ")
	l.calls = append(l.calls, line)
	if name != "lsblk" {
		return nil, nil
	}
	if strings.Contains(line, "MOUNTPOINTS") {
		return nil, &lvm.CommandError{Command: line, Code: 1, Stderr: "lsblk: unknown column: MOUNTPOINTS,PKNAME,MAJ:MIN"}
	}
	return []byte(`{"blockdevices": [{"name":"/dev/sdb","kname":"/dev/sdb","type":"disk","size":"1073741824","ro":"0","rota":"1","mountpoint":null},
	  {"name":"/dev/sdc","kname":"/dev/sdc","type":"disk","size":"1073741824","ro":"1","rota":"0","mountpoint":"/mnt"}]}`), nil
}

func TestDiscover_LegacyLsblk(t *testing.T) {
	r := &legacyRunner{}
	d := &Discoverer{Runner: r, Root: t.TempDir()}
	for range 2 {
		inv, err := d.Discover(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sdb, _ := inv.Get("/dev/sdb")
		sdc, _ := inv.Get("/dev/sdc")
		if sdb.Size != 1<<30 || !sdb.Rotational || sdb.ReadOnly || !sdc.ReadOnly || !reflect.DeepEqual(sdc.MountPoints, []string{"/mnt"}) {
			t.Errorf("sdb = %+v, sdc = %+v", *sdb, *sdc)
		}
	}
	var lsblkCalls int
	for _, c := range r.calls {
		if strings.HasPrefix(c, "lsblk") {
			lsblkCalls++
		}
	}
	if lsblkCalls != 3 {
		t.Errorf("lsblk ran %d times, want 3 (the new columns are tried once, then remembered): %v", lsblkCalls, r.calls)
	}
}

func TestParseLsblk_Errors(t *testing.T) {
	tests := []struct {
		name, input, wantErr string
	}{
		{"not JSON", "lsblk: failed to access sysfs", "parse lsblk JSON"},
		{"size not a number", `{"blockdevices":[{"kname":"/dev/sda","size":"1G"}]}`, `want a size in bytes, got "1G"`},
		{"boolean not a boolean", `{"blockdevices":[{"kname":"/dev/sda","ro":"maybe"}]}`, `want a boolean, got "maybe"`},
		{"device without a name", `{"blockdevices":[{"type":"disk"}]}`, "a device without name or kname"},
		{"object where a string belongs", `{"blockdevices":[{"kname":{"a":1}}]}`, "want a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLsblk([]byte(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestForeignSignatures(t *testing.T) {
	tests := []struct {
		dev  Device
		want []string
	}{
		{Device{FSType: SigLVM2, Signatures: []string{SigLVM2}}, nil},
		{Device{PTType: SigGPT, Signatures: []string{SigGPT, SigGPT, SigPMBR}}, []string{SigGPT}},
		{Device{FSType: "ext4", Signatures: []string{"ext4", "swap"}}, []string{"ext4", "swap"}},
		{Device{Signatures: []string{SigPMBR}}, []string{SigPMBR}},
	}
	for _, tc := range tests {
		if got := tc.dev.ForeignSignatures(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: got %v, want %v", tc.dev, got, tc.want)
		}
	}
}

func FuzzParseLsblk(f *testing.F) {
	for _, p := range []string{"testdata/server/lsblk.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"blockdevices":[{"kname":"a","children":[{"kname":"b","children":[{"kname":"a"}]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		devs, err := ParseLsblk(data)
		if err != nil {
			return
		}
		inv := NewInventory(devs, t.TempDir())
		for _, d := range inv.Devices {
			if _, ok := inv.Get(d.KName); !ok {
				t.Fatalf("%s not found by Get", d.KName)
			}
		}
	})
}

func FuzzParseWipefs(f *testing.F) {
	data, err := os.ReadFile("testdata/server/wipefs.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("DEVNAME=/dev/sda1\nPART_ENTRY_NAME=a\\ b\n\nTYPE=x\n"))
	f.Add([]byte(`{"signatures":[{"device":"sdb","type":"LVM2_member"},{"device":"sdb","type":"LVM2_member"},{"device":"/dev/sdc","type":""}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sigs, err := ParseWipefs(data)
		if err == nil {
			// A device with a signature is never lost nor invented: every key is a device path with at
			// least one named signature, each named once.
			for dev, types := range sigs {
				if !strings.HasPrefix(dev, "/") || len(types) == 0 {
					t.Errorf("device %q with signatures %q", dev, types)
				}
				for i, typ := range types {
					if typ == "" || slices.Contains(types[:i], typ) {
						t.Errorf("device %s: signature list %q has an empty or repeated entry", dev, types)
					}
				}
			}
			var doc struct {
				Signatures []map[string]any `json:"signatures"`
			}
			if json.Unmarshal(data, &doc) == nil {
				for _, sig := range doc.Signatures {
					if len(sig) != 2 {
						continue // case variants of a key ("Device", "device"): which one wins is encoding/json's affair
					}
					dev, _ := sig["device"].(string)
					typ, _ := sig["type"].(string)
					dev, typ = strings.TrimSpace(dev), strings.TrimSpace(typ) // as wipefs pads them
					if dev == "" || typ == "" {
						continue
					}
					if !strings.HasPrefix(dev, "/") {
						dev = filepath.Join("/dev", dev)
					}
					if !slices.Contains(sigs[dev], typ) {
						t.Errorf("signature %q on %s lost: a disk in use would look blank", typ, dev)
					}
				}
			}
		}
		blk := ParseBlkidExport(data)
		if n := strings.Count(string(data), "DEVNAME="); len(blk) > n {
			t.Errorf("%d devices from %d DEVNAME lines", len(blk), n)
		}
		for dev, props := range blk {
			if _, ok := props["DEVNAME"]; ok {
				t.Errorf("device %q: DEVNAME kept as a property", dev)
			}
			for k, v := range props {
				if strings.Contains(v, `\ `) {
					t.Errorf("device %q: %s=%q keeps blkid's escaped space", dev, k, v)
				}
			}
		}
	})
}
