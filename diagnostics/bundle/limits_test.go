package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOpen_LimitsAreExact: a bundle exactly at a limit opens, one file or one byte more is ErrTooLarge,
// from a .tar.gz and from a directory alike.
func TestOpen_LimitsAreExact(t *testing.T) {
	version := "lvms\nv1\n" // 8 bytes, and 7 of name
	files := func(extra ...entry) []entry { return append([]entry{{name: "version", data: version}}, extra...) }
	// A file costs its size and its name's: version 15 bytes, and a and b 9 each with 8 bytes of data.
	lim := Limits{MaxEntries: 3, MaxEntryBytes: 10, MaxTotalBytes: 33}
	tests := []struct {
		name    string
		entries []entry
		tooBig  bool
	}{
		{"as many files as allowed", files(entry{name: "a", data: "1"}, entry{name: "b", data: "2"}), false},
		{"one file more", files(entry{name: "a", data: "1"}, entry{name: "b", data: "2"}, entry{name: "c", data: "3"}), true},
		{"a file of exactly the size allowed", files(entry{name: "a", data: strings.Repeat("x", 10)}), false},
		{"a file one byte larger", files(entry{name: "a", data: strings.Repeat("x", 11)}), true},
		{"files adding up to exactly the total", files(entry{name: "a", data: strings.Repeat("x", 8)}, entry{name: "b", data: strings.Repeat("y", 8)}), false},
		{"one byte over the total", files(entry{name: "a", data: strings.Repeat("x", 8)}, entry{name: "b", data: strings.Repeat("y", 9)}), true},
	}
	for _, tc := range tests {
		for _, kind := range []string{"tar", "dir"} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				src := t.TempDir()
				if kind == "tar" {
					src = writeTemp(t, makeTar(t, tc.entries))
				} else {
					for _, e := range tc.entries {
						if err := os.WriteFile(filepath.Join(src, e.name), []byte(e.data), 0o600); err != nil {
							t.Fatal(err)
						}
					}
				}
				files, err := Open(src, lim)
				switch {
				case tc.tooBig && !errors.Is(err, ErrTooLarge):
					t.Errorf("Open = %v, want ErrTooLarge", err)
				case !tc.tooBig && err != nil:
					t.Errorf("Open = %v, want the bundle", err)
				case !tc.tooBig && len(files.Names()) != len(tc.entries):
					t.Errorf("read %v, want %d files", files.Names(), len(tc.entries))
				}
			})
		}
	}
}

// TestOpen_MaxSizeEnv: $LVMS_BUNDLE_MAX_SIZE sets the default total, so a person can read a genuine bundle
// over it with any command; a value that is not a size is an error saying what to write.
func TestOpen_MaxSizeEnv(t *testing.T) {
	src := writeTemp(t, makeTar(t, []entry{{name: "version", data: "lvms\nv1\n"}, {name: "big.log", data: strings.Repeat("x", 2000)}}))
	t.Setenv(MaxSizeEnv, "1Ki")
	if _, err := Open(src, Limits{}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 1024 bytes") ||
		!strings.Contains(err.Error(), MaxSizeEnv+"=2Ki") {
		t.Errorf("with %s=1Ki: %v; want ErrTooLarge naming the 1024-byte limit and suggesting %s=2Ki", MaxSizeEnv, err, MaxSizeEnv)
	}
	if _, err := Open(src, Limits{MaxTotalBytes: 1 << 20}); err != nil {
		t.Errorf("an explicit limit is not the environment's: %v", err)
	}
	t.Setenv(MaxSizeEnv, "4Ki")
	if files, err := Open(src, Limits{}); err != nil || len(files.Names()) != 2 {
		t.Errorf("with %s=4Ki: %v; want the bundle", MaxSizeEnv, err)
	}
	for _, bad := range []string{"lots", "-1Gi", "0"} {
		t.Setenv(MaxSizeEnv, bad)
		if _, err := Open(src, Limits{}); err == nil || !strings.Contains(err.Error(), MaxSizeEnv+"=\""+bad+"\"") || !strings.Contains(err.Error(), "such as 512Mi") {
			t.Errorf("with %s=%q: %v; want an error naming the value and what to write", MaxSizeEnv, bad, err)
		}
	}
}

// TestOpen_Roots: the version file marks the root only near the top, and lvms's own root (its product in the
// version file, with a manifest) wins over another image's in a must-gather directory.
func TestOpen_Roots(t *testing.T) {
	deep := writeTemp(t, makeTar(t, []entry{{name: "a/b/c/version", data: "lvms\nv1\n"}, {name: "x.yaml", data: "kind: List\n"}}))
	if _, err := Open(deep, Limits{}); !errors.Is(err, ErrNotBundle) {
		t.Errorf("a version file three levels down: %v, want ErrNotBundle", err)
	}
	two := writeTemp(t, makeTar(t, []entry{
		{name: "mg/aa/version", data: "other-operator\nv9\n"}, {name: "mg/aa/manifest.json", data: "{}"},
		{name: "mg/zz/version", data: "lvms\nv1\n"}, {name: "mg/zz/manifest.json", data: manifestJSON(FormatVersion)},
	}))
	files, err := Open(two, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := files.Get(FileVersion); string(v) != "lvms\nv1\n" {
		t.Errorf("root chosen has version %q, want lvms's", v)
	}
}

// TestTarWriter_DirectoriesFirstOnce: every directory of the tar gets its own entry before the files in it,
// once, so tar and other extraction tools create it with mode 0755 rather than guessing.
func TestTarWriter_DirectoriesFirstOnce(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewTarWriter(&buf, "root", 0, at)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a/b/one.yaml", "a/b/two.yaml", "a/three.yaml", "four.yaml"} {
		if err := w.WriteFile(n, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var got []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeDir && h.Mode != 0o755 {
			t.Errorf("directory %s has mode %o", h.Name, h.Mode)
		}
		got = append(got, h.Name)
	}
	want := []string{"root/", "root/a/", "root/a/b/", "root/a/b/one.yaml", "root/a/b/two.yaml", "root/a/three.yaml", "root/four.yaml"}
	if !slices.Equal(got, want) {
		t.Errorf("tar entries %q, want %q", got, want)
	}
}

// TestDirWriter_StampsFiles: a must-gather directory's files carry the collection time, as tar entries do.
func TestDirWriter_StampsFiles(t *testing.T) {
	dir := t.TempDir()
	w, err := NewDirWriter(dir, 0, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("a/b.yaml", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "a", "b.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !st.ModTime().Equal(at) {
		t.Errorf("a/b.yaml modified at %s, want the collection time %s", st.ModTime(), at)
	}
}
