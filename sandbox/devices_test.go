package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

func TestVolumeDevices_ABlockDeviceOfItsSizePerVolumeKeepingItsBytes(t *testing.T) {
	loopdev.RequireRoot(t)
	ctx := context.Background()
	dir := t.TempDir()
	d := newVolumeDevices(filepath.Join(dir, "disks", "volumes", "n1"), filepath.Join(dir, "dev"))
	t.Cleanup(func() {
		if err := d.detachAll(ctx); err != nil {
			t.Error(err)
		}
		if loops, err := loopsUnder(ctx, dir); err != nil || len(loops) > 0 {
			t.Errorf("loop devices left: %v (%v)", loops, err)
		}
	})
	vol := func(vg, name string, size uint64, role ...string) lvm.LV {
		return lvm.LV{VGName: vg, Name: name, Size: size, Attr: "-wi-------", Role: role}
	}
	report := &lvm.Report{LVs: []lvm.LV{
		vol("vg1", "a", 8<<20), vol("vg1", "b", 4<<20), vol("vg2", "c", 4<<20),
		vol("vg1", "lvol0_pmspare", 4<<20, "private", "pool", "spare"),
		{VGName: "vg2", Name: "pool", Size: 64 << 20, Attr: "twi-------"},
	}}
	if err := d.sync(ctx, report); err != nil {
		t.Fatal(err)
	}
	// size is the size of the block device at dev/<vg>/<lv>; -1 when there is none.
	size := func(vg, lv string) int64 {
		t.Helper()
		path := filepath.Join(dir, "dev", vg, lv)
		if fi, err := os.Stat(path); err != nil || fi.Mode()&os.ModeDevice == 0 {
			return -1
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		n, err := f.Seek(0, 2)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		vg, lv string
		want   int64
	}{{"vg1", "a", 8 << 20}, {"vg1", "b", 4 << 20}, {"vg2", "c", 4 << 20}, {"vg1", "lvol0_pmspare", -1}, {"vg2", "pool", -1}} {
		if got := size(c.vg, c.lv); got != c.want {
			t.Errorf("%s/%s: device of %d bytes, want %d (-1: none)", c.vg, c.lv, got, c.want)
		}
	}

	// What a move wrote to a device stays; a grown volume's device grows and keeps its bytes; a removed
	// volume's device goes.
	f, err := os.OpenFile(filepath.Join(dir, "dev", "vg1", "a"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("data"), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	report.LVs = []lvm.LV{vol("vg1", "a", 16<<20), vol("vg2", "c", 4<<20)}
	if err := d.sync(ctx, report); err != nil {
		t.Fatal(err)
	}
	if got := size("vg1", "a"); got != 16<<20 {
		t.Errorf("grown volume: device of %d bytes, want %d", got, 16<<20)
	}
	got := make([]byte, 4)
	if f, err := os.Open(filepath.Join(dir, "dev", "vg1", "a")); err != nil {
		t.Fatal(err)
	} else {
		f.ReadAt(got, 1<<20)
		f.Close()
	}
	if string(got) != "data" {
		t.Errorf("the grown volume's device lost its bytes: %q", got)
	}
	if got := size("vg1", "b"); got != -1 {
		t.Errorf("a removed volume's device is still there (%d bytes)", got)
	}
	if loops, err := loopsUnder(ctx, dir); err != nil || len(loops) != 2 {
		t.Errorf("loop devices for 2 volumes: %v (%v)", loops, err)
	}
}
