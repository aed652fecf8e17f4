package sandbox

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseLoopList(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    []string
		wantErr bool
	}{
		{name: "no loop devices", data: "", want: nil},
		{name: "matching and other back-files", data: `{"loopdevices":[{"name":"/dev/loop0","back-file":"/s/disks/a.img"},{"name":"/dev/loop1","back-file":"/other/b.img"}]}`,
			want: []string{"/dev/loop0"}},
		{name: "a deleted back-file still counts", data: `{"loopdevices":[{"name":"/dev/loop3","back-file":"/s/disks/a.img (deleted)"}]}`,
			want: []string{"/dev/loop3"}},
		{name: "garbage is an error", data: `{"loopdevices":`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLoopList([]byte(tc.data), func(back string) bool { return filepath.Dir(back) == "/s/disks" })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzParseLoopList(f *testing.F) {
	f.Add([]byte(`{"loopdevices":[{"name":"/dev/loop0","back-file":"/x (deleted)"}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"loopdevices":[{"name":"/dev/loop1","back-file":"/var/lib/lvms/a.img"},{"name":"/dev/loop2","back-file":"/other"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		all, err := parseLoopList(data, func(string) bool { return true })
		if err != nil {
			return
		}
		if none, _ := parseLoopList(data, func(string) bool { return false }); len(none) != 0 {
			t.Errorf("no back file matches, yet %v were picked: the sandbox would detach loop devices it does not own", none)
		}
		// Every other back file matches: exactly the devices asked about with true come back, in order.
		var asked []string
		odd := false
		some, _ := parseLoopList(data, func(f string) bool {
			asked = append(asked, f)
			odd = !odd
			return odd
		})
		if len(asked) != len(all) {
			t.Fatalf("asked about %d back files for %d devices", len(asked), len(all))
		}
		var want []string
		for i, name := range all {
			if i%2 == 0 {
				want = append(want, name)
			}
		}
		if !slices.Equal(some, want) {
			t.Errorf("picked %v, want %v (the devices whose back file matched)", some, want)
		}
	})
}

func TestWriteMBR(t *testing.T) {
	const size = 64 << 20
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := WriteMBR(f, size); err != nil {
		t.Fatal(err)
	}
	mbr := make([]byte, 512)
	if _, err := f.ReadAt(mbr, 0); err != nil {
		t.Fatal(err)
	}
	if mbr[510] != 0x55 || mbr[511] != 0xaa {
		t.Fatalf("no boot signature: %x %x", mbr[510], mbr[511])
	}
	type part struct {
		typ          byte
		start, count uint32
	}
	read := func(off int) part {
		return part{mbr[off+4], binary.LittleEndian.Uint32(mbr[off+8:]), binary.LittleEndian.Uint32(mbr[off+12:])}
	}
	p1, p2 := read(446), read(462)
	if p1.typ != 0x83 || p2.typ != 0x83 || p1.start != 2048 || p2.start != p1.start+p1.count || p2.start+p2.count != size/512 {
		t.Errorf("partitions = %+v %+v, want two Linux partitions from sector 2048 to the end", p1, p2)
	}
	if err := WriteMBR(f, 1<<20); err == nil {
		t.Errorf("a 1 MiB disk was partitioned, want an error")
	}
}
