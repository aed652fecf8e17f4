package vm

import (
	"encoding/binary"
	"os"
	"testing"
)

// WriteTransfer writes data to a transfer disk inside the guest (a Disk the host reads back after the VM
// stops, e.g. a recording): an 8-byte little-endian length, then the data.
func WriteTransfer(t testing.TB, dev string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := binary.LittleEndian.AppendUint64(nil, uint64(len(data)))
	if _, err := f.Write(append(hdr, data...)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// ReadTransfer reads on the host what WriteTransfer wrote into the disk file at path.
func ReadTransfer(t testing.TB, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 8 {
		t.Fatalf("transfer disk %s too small", path)
	}
	n := binary.LittleEndian.Uint64(raw[:8])
	if n == 0 || n > uint64(len(raw)-8) {
		t.Fatalf("the guest wrote nothing to the transfer disk (length %d)", n)
	}
	return raw[8 : 8+n]
}
