package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// bomb writes a .tar.gz that expands to entries x entrySize bytes of zeros: one gzip member holding a tar
// entry, repeated (gzip readers read concatenated members as one stream), so building a 10 GiB bomb
// compresses only one entry. Every entry is under the per-file limit; the entries share a name, which the
// reader would refuse as a duplicate only at the second one, after the first 100 MiB are in memory.
func bomb(t *testing.T, entries int, entrySize int64) (string, int64) {
	t.Helper()
	member := func() []byte {
		var buf bytes.Buffer
		gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		tw := tar.NewWriter(gz)
		if err := tw.WriteHeader(&tar.Header{Name: "b/zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: entrySize}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(tw, zeros{}, entrySize); err != nil {
			t.Fatal(err)
		}
		if err := tw.Flush(); err != nil { // no end-of-archive marker: the next member continues the tar
			t.Fatal(err)
		}
		if err := gz.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	one := member()
	p := filepath.Join(t.TempDir(), "bomb.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var size int64
	for range entries {
		n, err := f.Write(one)
		if err != nil {
			t.Fatal(err)
		}
		size += int64(n)
	}
	return p, size
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestOpen_DecompressionBomb(t *testing.T) {
	const entry = 100 << 20 // under the 256 MiB per-file limit
	p, size := bomb(t, 100, entry)
	t.Logf("%d compressed bytes expanding to %d bytes", size, int64(100)*entry)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Open(p, Limits{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "decompression bomb") || !strings.Contains(err.Error(), p) {
		t.Fatalf("Open: %v, want ErrTooLarge naming the file and calling it a decompression bomb", err)
	}
	t.Logf("error: %v", err)
	// Refused after about ratioFloor bytes, not after the whole first 100 MiB entry, let alone 10 GiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*ratioFloor {
		t.Errorf("Open allocated %d bytes before refusing; want at most %d", alloc, 3*ratioFloor)
	}
}

func TestOpen_LargeRealisticBundleIsNotABomb(t *testing.T) {
	// Text that compresses like a real bundle (YAML of many objects) and expands past ratioFloor is read.
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range validEntries("b") {
		if e.typeflag == tar.TypeDir {
			continue
		}
		write(t, tw, e.name, []byte(e.data))
	}
	var obj bytes.Buffer
	for i := range 1_000_000 {
		fmt.Fprintf(&obj, "- name: pvc-%08x-%d\n  uid: %x\n  size: %d\n", i*2654435761, i, uint64(i)*0x9e3779b97f4a7c15, i*4096)
	}
	write(t, tw, "b/cluster-scoped-resources/big.yaml", obj.Bytes())
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if int64(obj.Len()) < ratioFloor {
		t.Fatalf("test data is %d bytes, want more than %d to reach the ratio check", obj.Len(), ratioFloor)
	}
	files, err := Open(writeTemp(t, buf.Bytes()), Limits{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got, _ := files.Get("cluster-scoped-resources/big.yaml"); len(got) != obj.Len() {
		t.Errorf("big.yaml is %d bytes, want %d", len(got), obj.Len())
	}
}

func write(t *testing.T, tw *tar.Writer, name string, data []byte) {
	t.Helper()
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
}

// overLimitBomb writes a .tar.gz of 1 MiB files, one more than fit in limit bytes of files: each file's data
// holds a few random bytes per 4 KiB, so it compresses about 50 times, like text and under MaxRatio, and the
// expansion guard's ratio check never fires; only the total limit can refuse it. The data is one gzip
// member, compressed once and repeated after each file's own header member.
func overLimitBomb(t *testing.T, limit int64) (string, int64) {
	t.Helper()
	const size = 1 << 20
	rnd := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, size)
	for off := 0; off < size; off += 4096 {
		for i := range 80 {
			data[off+i] = byte(rnd.Uint32())
		}
	}
	gzipped := func(b []byte) []byte {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		if _, err := gz.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := gz.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	body := gzipped(data)
	p := filepath.Join(t.TempDir(), "over.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var compressed int64
	for i := range limit/size + 1 {
		var entry bytes.Buffer // the header, then the data, which is cut off: the shared member holds it
		tw := tar.NewWriter(&entry)
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("b/f%05d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := tw.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{gzipped(entry.Bytes()[:entry.Len()-size]), body} {
			n, err := f.Write(b)
			if err != nil {
				t.Fatal(err)
			}
			compressed += int64(n)
		}
	}
	return p, compressed
}

// TestOpen_JustOverTheLimit: a crafted bundle of a few MiB that expands, at a ratio real bundles reach, to
// just over the default limit is refused with a message naming the limit and how to raise it, and reading it
// allocates no more than the limit: what a 5,000-node bundle needs (see Limits), not the 2 GiB that a 10 MiB
// file could once make lvms hold.
func TestOpen_JustOverTheLimit(t *testing.T) {
	const limit = 256 << 20  // the README's figure
	t.Setenv(MaxSizeEnv, "") // the default, whatever this shell says
	p, size := overLimitBomb(t, limit)
	t.Logf("%d compressed bytes expanding to %d bytes of files", size, limit+(1<<20))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Open(p, Limits{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "256 MiB") ||
		!strings.Contains(err.Error(), "LVMS_BUNDLE_MAX_SIZE") {
		t.Fatalf("Open: %v; want ErrTooLarge naming the file, the 256 MiB limit and LVMS_BUNDLE_MAX_SIZE", err)
	}
	t.Logf("error: %v", err)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("Open allocated %d bytes", alloc)
	if alloc > limit {
		t.Errorf("Open allocated %d bytes before refusing; want at most the limit, %d", alloc, limit)
	}
}
