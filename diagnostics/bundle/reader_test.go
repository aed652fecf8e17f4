package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// entry is one tar entry of a hand-made bundle.
type entry struct {
	name     string
	typeflag byte
	data     string
	link     string
	size     int64 // header size when not len(data)
}

func manifestJSON(format int) string {
	b, _ := json.Marshal(Manifest{Format: format, Product: Product, Version: "v1.2.3", Started: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)})
	return string(b)
}

// validEntries is a minimal well-formed bundle under root r.
func validEntries(r string) []entry {
	return []entry{
		{name: r + "/", typeflag: tar.TypeDir},
		{name: r + "/version", data: "lvms\nv1.2.3\n"},
		{name: r + "/manifest.json", data: manifestJSON(FormatVersion)},
		{name: r + "/cluster-scoped-resources/core/nodes/worker-a.yaml", data: "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-a\n"},
	}
}

func makeTar(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: 0o644, Linkname: e.link, Size: int64(len(e.data))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if e.size > 0 {
			h.Size = e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && e.size == 0 {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Flush(); err != nil && !strings.Contains(err.Error(), "missed writing") {
		t.Fatal(err)
	}
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad_BadInput(t *testing.T) {
	good := makeTar(t, validEntries("b"))
	tests := []struct {
		name    string
		data    []byte
		lim     Limits
		wantErr error
		wantMsg string
	}{
		{name: "not gzip", data: []byte("hello, I am a text file\n"), wantErr: ErrNotBundle, wantMsg: "not gzip-compressed"},
		{name: "zip file", data: []byte("PK\x03\x04rest-of-a-zip"), wantErr: ErrNotBundle, wantMsg: "not gzip-compressed"},
		{name: "empty file", data: nil, wantErr: ErrNotBundle},
		{name: "truncated", data: good[:len(good)/2], wantErr: ErrCorrupt, wantMsg: "copy the bundle again"},
		{name: "truncated gzip header", data: good[:5], wantErr: ErrCorrupt},
		{name: "gzip of garbage", data: func() []byte {
			var b bytes.Buffer
			gz := gzip.NewWriter(&b)
			_, _ = gz.Write(bytes.Repeat([]byte("x"), 2000))
			_ = gz.Close()
			return b.Bytes()
		}(), wantErr: ErrCorrupt},
		{name: "parent directory", data: makeTar(t, append(validEntries("b"), entry{name: "b/../../evil.sh", data: "rm -rf /"})),
			wantErr: ErrUnsafeEntry, wantMsg: `"b/../../evil.sh"`},
		{name: "parent directory at the start", data: makeTar(t, append(validEntries("b"), entry{name: "../evil.sh", data: "x"})), wantErr: ErrUnsafeEntry},
		{name: "absolute path", data: makeTar(t, append(validEntries("b"), entry{name: "/etc/cron.d/evil", data: "x"})),
			wantErr: ErrUnsafeEntry, wantMsg: "absolute"},
		{name: "symlink", data: makeTar(t, append(validEntries("b"), entry{name: "b/nodes/x", typeflag: tar.TypeSymlink, link: "/etc"})),
			wantErr: ErrUnsafeEntry, wantMsg: "links"},
		{name: "hard link", data: makeTar(t, append(validEntries("b"), entry{name: "b/h", typeflag: tar.TypeLink, link: "/etc/shadow"})),
			wantErr: ErrUnsafeEntry, wantMsg: "links"},
		{name: "device", data: makeTar(t, append(validEntries("b"), entry{name: "b/dev", typeflag: tar.TypeChar})), wantErr: ErrUnsafeEntry},
		{name: "duplicate", data: makeTar(t, append(validEntries("b"), entry{name: "b/version", data: "lvms\nv0\n"})), wantErr: ErrUnsafeEntry},
		{name: "huge entry", data: makeTar(t, append(validEntries("b"), entry{name: "b/huge.log", size: 1 << 40})),
			wantErr: ErrTooLarge, wantMsg: "huge.log"},
		{name: "entry over a small limit", data: makeTar(t, append(validEntries("b"), entry{name: "b/big.log", data: strings.Repeat("x", 2000)})),
			lim: Limits{MaxEntryBytes: 1000}, wantErr: ErrTooLarge},
		{name: "total over the limit", data: good, lim: Limits{MaxTotalBytes: 50}, wantErr: ErrTooLarge},
		{name: "too many entries", data: good, lim: Limits{MaxEntries: 2}, wantErr: ErrTooLarge},
		{name: "no version file", data: makeTar(t, validEntries("b")[2:]), wantErr: ErrNotBundle, wantMsg: "version"},
		{name: "another product", data: makeTar(t, []entry{{name: "version", data: "ocp\n4.20\n"}, {name: "manifest.json", data: manifestJSON(1)}}), wantErr: ErrNotBundle},
		{name: "no manifest", data: makeTar(t, validEntries("b")[:2]), wantErr: ErrNotBundle, wantMsg: "manifest.json"},
		{name: "newer format", data: makeTar(t, []entry{{name: "version", data: "lvms\nv9\n"}, {name: "manifest.json", data: manifestJSON(FormatVersion + 1)}}),
			wantErr: ErrNewerFormat, wantMsg: "newer"},
		{name: "manifest not JSON", data: makeTar(t, []entry{{name: "version", data: "lvms\nv9\n"}, {name: "manifest.json", data: "{"}}), wantErr: ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeTemp(t, tc.data), tc.lim)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) || !strings.Contains(err.Error(), "bundle.tar.gz") {
				t.Errorf("err = %q, want it to name the file and say %q", err, tc.wantMsg)
			}
		})
	}
}

func TestExtract_WritesNothingOutsideTheTarget(t *testing.T) {
	hostile := map[string][]entry{
		"traversal": append(validEntries("b"), entry{name: "b/../../escaped", data: "x"}),
		"absolute":  append(validEntries("b"), entry{name: "/tmp/escaped", data: "x"}),
		"symlink then file through it": append(validEntries("b"),
			entry{name: "b/link", typeflag: tar.TypeSymlink, link: ".."}, entry{name: "b/link/escaped", data: "x"}),
		"huge": append(validEntries("b"), entry{name: "b/escaped", size: 1 << 40}),
	}
	for name, entries := range hostile {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			src := filepath.Join(base, "in.tar.gz")
			if err := os.WriteFile(src, makeTar(t, entries), 0o600); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(base, "out", "target")
			if _, err := Extract(src, target, Limits{}); err == nil {
				t.Fatal("extracting a hostile bundle succeeded")
			}
			var found []string
			_ = filepath.Walk(base, func(p string, info os.FileInfo, err error) error {
				if err == nil && p != base && p != src {
					found = append(found, p)
				}
				return nil
			})
			if len(found) != 0 {
				t.Errorf("files written: %v", found)
			}
			if _, err := os.Stat("/tmp/escaped"); err == nil {
				t.Error("/tmp/escaped exists")
			}
		})
	}
}

func TestExtract_GoodBundle(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "in.tar.gz")
	if err := os.WriteFile(src, makeTar(t, validEntries("lvms-bundle-x")), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "out")
	names, err := Extract(src, target, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 3 {
		t.Errorf("extracted %v", names)
	}
	b, err := os.ReadFile(filepath.Join(target, "cluster-scoped-resources", "core", "nodes", "worker-a.yaml"))
	if err != nil || !strings.Contains(string(b), "worker-a") {
		t.Errorf("node file: %v %s", err, b)
	}
	if _, err := Extract(src, target, Limits{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("extracting into a non-empty directory: %v", err)
	}
	empty := filepath.Join(base, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if names, err := Extract(src, empty, Limits{}); err != nil || len(names) != 3 {
		t.Errorf("extracting into an existing empty directory: %v, %v", names, err)
	}
}

func TestOpen_DirectoryRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	for _, e := range validEntries(".")[1:] {
		p := filepath.Join(dir, e.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(e.data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(dir, Limits{}); err != nil {
		t.Fatalf("a plain directory: %v", err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, Limits{}); !errors.Is(err, ErrUnsafeEntry) {
		t.Errorf("a directory with a link: %v, want %v", err, ErrUnsafeEntry)
	}
}

func TestOpen_MustGatherWithSeveralImages(t *testing.T) {
	entries := []entry{
		{name: "must-gather.local.1/version", data: "openshift\n4.20\n"},
		{name: "must-gather.local.1/quay-io-lvms-must-gather/version", data: "lvms\nv1.2.3\n"},
		{name: "must-gather.local.1/quay-io-lvms-must-gather/manifest.json", data: manifestJSON(FormatVersion)},
		{name: "must-gather.local.1/quay-io-lvms-must-gather/cluster-scoped-resources/core/nodes/worker-a.yaml", data: "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-a\n"},
	}
	b, err := Load(writeTemp(t, makeTar(t, entries)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != "v1.2.3" || len(b.Objects) != 1 {
		t.Errorf("version %q, %d objects: the lvms image's directory should be the root", b.Version, len(b.Objects))
	}
}

func FuzzOpen(f *testing.F) {
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Add([]byte("not a bundle"))
	// Valid bundles, so mutations reach past the gzip and tar checks into entries, roots and decoding.
	f.Add(makeTar(f, validEntries("b")))
	f.Add(makeTar(f, append(validEntries("must-gather.local.1/img"), entry{name: "must-gather.local.1/img/namespaces/lvms/core/events.yaml", data: "kind: List\nitems: []\n"})))
	var written bytes.Buffer
	w, err := NewTarWriter(&written, "lvms-bundle", 1<<20, at)
	if err != nil {
		f.Fatal(err)
	}
	writeSample(f, w)
	f.Add(written.Bytes())
	lim := Limits{MaxTotalBytes: 1 << 20, MaxEntryBytes: 1 << 20, MaxEntries: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "f.tar.gz")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		files, err := Open(p, lim)
		if err != nil {
			if !errors.Is(err, ErrNotBundle) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsafeEntry) &&
				!errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrNewerFormat) {
				t.Errorf("error %v is none of the reader's kinds: a user cannot tell what is wrong", err)
			}
			return
		}
		if files.Size() > lim.MaxTotalBytes || len(files.Names()) > lim.MaxEntries {
			t.Errorf("accepted %d bytes in %d files, over the limits", files.Size(), len(files.Names()))
		}
		if _, ok := files.Get(FileVersion); !ok {
			t.Errorf("accepted a bundle without a %s file at its root: %v", FileVersion, files.Names())
		}
		for _, n := range files.Names() {
			if strings.HasPrefix(n, "/") || strings.Contains("/"+n+"/", "/../") || !filepath.IsLocal(n) {
				t.Errorf("unsafe name %q accepted", n)
			}
		}
		_, _ = Decode(files)
	})
}
