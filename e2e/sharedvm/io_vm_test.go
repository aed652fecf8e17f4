package sharedvm

import (
	"bytes"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// alignedBuffer returns n bytes aligned for O_DIRECT.
func alignedBuffer(n int) []byte {
	const align = 4096
	b := make([]byte, n+align)
	off := 0
	if r := int(uintptrOf(b) % align); r != 0 {
		off = align - r
	}
	return b[off : off+n]
}

func writeDirect(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuffer(len(data))
	copy(buf, data)
	if _, err := f.Write(buf); err != nil {
		t.Fatalf("O_DIRECT write to %s: %v", path, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func readDirect(t *testing.T, path string, n int) []byte {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuffer(n)
	if _, err := f.Read(buf); err != nil {
		t.Fatalf("O_DIRECT read of %s: %v", path, err)
	}
	return bytes.Clone(buf)
}

// uintptrOf is the address of a buffer's first byte, to align buffers for O_DIRECT.
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
