package blockdev

import (
	"os"
	"path/filepath"
	"testing"
)

// sysTree writes /sys/class/block entries for a disk sdx with partition sdx1 under root, as the kernel
// lays them out (class links into the devices tree, the partition inside its disk's directory).
func sysTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	disk := filepath.Join(root, "sys/devices/virtual/block/sdx")
	for name, content := range files {
		p := filepath.Join(disk, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	class := filepath.Join(root, "sys/class/block")
	if err := os.MkdirAll(class, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"sdx": disk, "sdx1": filepath.Join(disk, "sdx1")} {
		if err := os.Symlink(target, filepath.Join(class, link)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
}

const idleStat = "100 0 800 5 7 1 56 3 0 9 9 0 0 0 0 2 1"

func TestWriteRecord(t *testing.T) {
	root := t.TempDir()
	base := map[string]string{"stat": idleStat, "size": "2048", "diskseq": "42", "queue/iostats": "1",
		"sdx1/stat": idleStat, "sdx1/size": "1024", "sdx1/partition": "1"}
	sysTree(t, root, base)
	disk, part := &Device{KName: "/dev/sdx", Type: TypeDisk}, &Device{KName: "/dev/sdx1", Type: TypePart}
	diskKey, partKey := writeRecord(root, disk), writeRecord(root, part)
	if diskKey == "" || partKey == "" || diskKey == partKey {
		t.Fatalf("keys %q and %q", diskKey, partKey)
	}
	// Reads change nothing; writes, discards, a new medium or a new size change the record.
	for _, c := range []struct {
		name, file, content string
		dev                 *Device
		want                string // "same", "changed" or "none"
	}{
		{"reads", "stat", "999 9 9999 99 7 1 56 3 0 99 99 0 0 0 0 2 1", disk, "same"},
		{"a write", "stat", "100 0 800 5 8 1 64 3 0 9 9 0 0 0 0 2 1", disk, "changed"},
		{"a discard", "stat", "100 0 800 5 7 1 56 3 0 9 9 1 0 8 0 2 1", disk, "changed"},
		{"I/O in flight", "stat", "100 0 800 5 7 1 56 3 1 9 9 0 0 0 0 2 1", disk, "none"},
		{"a new medium", "diskseq", "43", disk, "changed"},
		{"a new size", "size", "4096", disk, "changed"},
		{"no I/O accounting", "queue/iostats", "0", disk, "none"},
		{"a write to the disk, for its partition", "stat", "100 0 800 5 8 1 64 3 0 9 9 0 0 0 0 2 1", part, "changed"},
		{"a write to the partition", "sdx1/stat", "100 0 800 5 8 1 64 3 0 9 9 0 0 0 0 2 1", part, "changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sysTree(t, root, map[string]string{c.file: c.content})
			t.Cleanup(func() { sysTree(t, root, map[string]string{c.file: base[c.file]}) })
			before := diskKey
			if c.dev == part {
				before = partKey
			}
			got := writeRecord(root, c.dev)
			switch {
			case c.want == "same" && got != before, c.want == "changed" && (got == before || got == ""), c.want == "none" && got != "":
				t.Errorf("record %q, was %q; want %s", got, before, c.want)
			}
		})
	}
	for _, typ := range []string{TypeMpath, TypeCrypt, "raid1", "dm"} {
		if got := writeRecord(root, &Device{KName: "/dev/sdx", Type: typ}); got != "" {
			t.Errorf("a %s device has a write record %q; its content can change beneath it", typ, got)
		}
	}
	if got := writeRecord(root, &Device{KName: "/dev/nosuch", Type: TypeDisk}); got != "" {
		t.Errorf("an unknown device has a write record %q", got)
	}
	// A loop device's back file can be written without the device: its size and time are in the record.
	sysTree(t, root, map[string]string{})
	if err := os.WriteFile(filepath.Join(root, "back"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	loop := &Device{KName: "/dev/sdx", Type: TypeLoop, BackingFile: "/back"}
	k1 := writeRecord(root, loop)
	if err := os.WriteFile(filepath.Join(root, "back"), []byte("xy"), 0o644); err != nil {
		t.Fatal(err)
	}
	if k2 := writeRecord(root, loop); k1 == "" || k1 == k2 {
		t.Errorf("loop device records %q then %q after its back file was written", k1, k2)
	}
	if got := writeRecord(root, &Device{KName: "/dev/sdx", Type: TypeLoop}); got != "" {
		t.Errorf("a loop device without a known back file has a record %q", got)
	}
}
