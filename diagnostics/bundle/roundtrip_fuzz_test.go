package bundle

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzWriteThenOpen: whatever the writer accepts, the reader gives back, name for name and byte for byte,
// from a tar.gz and from a directory; a bundle `lvms bundle` wrote is never one `lvms inspect` refuses.
func FuzzWriteThenOpen(f *testing.F) {
	f.Add("namespaces/lvms/core/events.yaml", []byte("kind: List\n"), "cluster-scoped-resources/core/nodes/a.yaml", []byte("x"))
	f.Add("nodes/worker-a/lsblk.json", []byte("{}"), "a:b/c", []byte{0})
	// Found by this target: the writer accepted a backslash the reader refuses.
	f.Add("x\\y", []byte(""), "rbac/clusterroles/system:node.yaml", []byte("y"))
	f.Fuzz(func(t *testing.T, n1 string, d1 []byte, n2 string, d2 []byte) {
		for _, kind := range []string{"tar", "dir"} {
			dir := t.TempDir()
			var buf bytes.Buffer
			var w *Writer
			var err error
			if kind == "tar" {
				w, err = NewTarWriter(&buf, "lvms-bundle", 0, at)
			} else {
				w, err = NewDirWriter(dir, 0, at)
			}
			if err != nil {
				t.Fatal(err)
			}
			written := map[string][]byte{}
			if err := w.WriteMeta(FileVersion, VersionFile("v1")); err != nil {
				t.Fatal(err)
			}
			written[FileVersion] = VersionFile("v1")
			for _, e := range []struct {
				name string
				data []byte
			}{{n1, d1}, {n2, d2}} {
				if w.WriteFile(e.name, e.data) == nil {
					written[e.name] = e.data
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			src := dir
			if kind == "tar" {
				src = filepath.Join(dir, "b.tar.gz")
				if err := os.WriteFile(src, buf.Bytes(), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			files, err := Open(src, Limits{})
			if err != nil {
				t.Fatalf("%s: the reader refuses what the writer wrote (%q, %q): %v", kind, n1, n2, err)
			}
			want := slices.Sorted(func(yield func(string) bool) {
				for n := range written {
					if !yield(n) {
						return
					}
				}
			})
			if got := files.Names(); !slices.Equal(got, want) {
				t.Fatalf("%s: read back %q, wrote %q", kind, got, want)
			}
			for n, d := range written {
				if got, _ := files.Get(n); !bytes.Equal(got, d) {
					t.Errorf("%s: %s read back as %q, written %q", kind, n, got, d)
				}
			}
		}
	})
}
