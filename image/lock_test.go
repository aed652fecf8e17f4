package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// apt-cache depends output as bookworm's apt prints it (recorded from `apt-cache depends --no-recommends
// ... lvm2 xfsprogs`, trimmed), with a virtual package and an alternative added as apt prints those.
const recordedDepends = `lvm2
  Depends: libaio1
  Depends: libc6
  Depends: libsystemd0
    libelogind0
  Depends: lsb-base
    sysvinit-utils
  Depends: dmsetup
xfsprogs
  Depends: libblkid1
  Depends: <python3:any>
    python3
  |Depends: mawk
  Depends: gawk
  PreDepends: libc6
`

func TestDepends_TakesFirstAlternativesAndVirtualProviders(t *testing.T) {
	got := Depends(recordedDepends)
	want := []string{"libaio1", "libc6", "libsystemd0", "lsb-base", "dmsetup", "libblkid1", "python3", "mawk", "libc6"}
	if !slices.Equal(got, want) {
		t.Errorf("Depends = %v\nwant      %v", got, want)
	}
}

func TestParseLock_RefusesMalformedLinesWithTheFix(t *testing.T) {
	good := "# header\nlvm2 2.03.16-2 amd64 608ae8de670342fc80d388185be64af9c886e61d145669a606db002663f7fd82\n"
	pkgs, err := ParseLock(strings.NewReader(good))
	if err != nil || len(pkgs) != 1 || pkgs[0].String() != "lvm2=2.03.16-2" {
		t.Fatalf("ParseLock = %v, %v", pkgs, err)
	}
	for _, bad := range []string{"", "# only comments\n", "lvm2 2.03.16-2 amd64\n", "lvm2 2.03.16-2 amd64 not-a-sha\n"} {
		if _, err := ParseLock(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseLock(%q) accepted it", bad)
		}
	}
	_, err = ParseLock(strings.NewReader("lvm2 x amd64 y\n"))
	if err == nil || !strings.Contains(err.Error(), "make image-lock") {
		t.Errorf("err = %v, want it to name make image-lock", err)
	}
	var buf bytes.Buffer
	if err := FormatLock(&buf, "h", pkgs); err != nil {
		t.Fatal(err)
	}
	if again, err := ParseLock(&buf); err != nil || !slices.Equal(again, pkgs) {
		t.Errorf("FormatLock then ParseLock = %v, %v; want %v", again, err, pkgs)
	}
}

// Packages' /bin, /sbin and /lib land under /usr (the image links them there), the tar lists parents before
// children in a fixed order with fixed times and owners, and documentation except copyright is dropped.
func TestRootFS_MergesUsrAndWritesTheSameBytesForTheSameFiles(t *testing.T) {
	pkg := func(names ...string) io.Reader {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, n := range names {
			_ = tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o755, Size: 1, ModTime: time.Now(), Uname: "builder"})
			_, _ = tw.Write([]byte("x"))
		}
		_ = tw.Close()
		return &b
	}
	build := func(order ...[]string) []byte {
		r := NewRootFS()
		for _, names := range order {
			if err := r.AddTar(pkg(names...)); err != nil {
				t.Fatal(err)
			}
		}
		var out bytes.Buffer
		if err := r.Tar(&out, time.Unix(1700000000, 0)); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	a := []string{"./sbin/lvm", "./usr/share/doc/lvm2/changelog.gz", "./usr/share/doc/lvm2/copyright"}
	b := []string{"./lib/x86_64-linux-gnu/libc.so.6", "./usr/share/man/man8/lvm.8.gz"}
	one, two := build(a, b), build(b, a)
	if !bytes.Equal(one, two) {
		t.Error("the same files added in another order give other bytes")
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(one))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.ModTime.Unix() != 1700000000 || h.Uname != "" {
			t.Errorf("%s: time %v owner %q, want the fixed time and no names", h.Name, h.ModTime, h.Uname)
		}
		names = append(names, h.Name)
	}
	for _, want := range []string{"usr/sbin/lvm", "usr/lib/x86_64-linux-gnu/libc.so.6", "usr/share/doc/lvm2/copyright", "sbin", "usr/", "usr/sbin/"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in %v", want, names)
		}
	}
	for _, gone := range []string{"sbin/lvm", "usr/share/doc/lvm2/changelog.gz", "usr/share/man/man8/lvm.8.gz"} {
		if slices.Contains(names, gone) {
			t.Errorf("%s is in the image", gone)
		}
	}
	if i, j := slices.Index(names, "usr/sbin/"), slices.Index(names, "usr/sbin/lvm"); i < 0 || i > j {
		t.Errorf("usr/sbin/ at %d after its file at %d", i, j)
	}
}
