package bundle

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Limits bound what a reader accepts, so a hostile or broken file cannot exhaust memory. A reader holds every
// file of a bundle in memory, so MaxTotalBytes bounds its memory, plus the decompressor's buffers and the
// bookkeeping of at most MaxEntries files (about 350 bytes each); decoding the objects (Load) holds about
// three times the files' size in all.
//
// The defaults are what a 5,000-node cluster's bundle needs, with headroom. `lvms bundle` against the benchmark
// cluster (diagnostics/collect BenchmarkBundle with its node count raised to 5,000: per node an LVMNode with
// 16 devices, two volumes, an agent pod and the agent's view; no pod logs) wrote 77.9 MB of files, 80.1 MB with
// their names (15.6 MB at 1,000 nodes), in 50,015 files, compressed 21 times to 3.6 MB; its largest file,
// analysis.json, is 24.8 MB; Load holds 240 MB of it. MaxTotalBytes's 256 MiB is 3.3 times that. Pod logs come
// on top (up to --log-limit-bytes per container, within the collector's --max-size): a bundle they take past
// the limit is refused with a message naming MaxSizeEnv, which raises it.
type Limits struct {
	// MaxEntryBytes bounds one file (default 256 MiB).
	MaxEntryBytes int64
	// MaxTotalBytes bounds all files together, their names included (default DefaultMaxTotalBytes, or
	// $LVMS_BUNDLE_MAX_SIZE).
	MaxTotalBytes int64
	// MaxEntries bounds the number of entries (default 200,000: 4 times the 5,000-node bundle's).
	MaxEntries int
	// MaxRatio bounds how many times larger than its compressed size a .tar.gz may expand once it has
	// expanded past 64 MiB (default 200; text bundles expand 5 to 30 times, the 5,000-node bundle 21 times, a
	// decompression bomb about 1000).
	MaxRatio int64
}

// DefaultMaxTotalBytes is MaxTotalBytes's default: a 5,000-node bundle's files, 3.3 times over (see Limits).
const DefaultMaxTotalBytes = 256 << 20

// MaxSizeEnv names the environment variable that sets MaxTotalBytes's default, as a size such as 1Gi, for
// every command that reads bundles (`lvms analyze`, `bundle diff`, `extract`, `serve`, the console and the
// TUI on a bundle): the way to read a genuine bundle over the default.
const MaxSizeEnv = "LVMS_BUNDLE_MAX_SIZE"

// ratioFloor is how far a bundle may expand before MaxRatio applies: small files compress unevenly.
const ratioFloor = 64 << 20

func (l Limits) withDefaults() (Limits, error) {
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = 256 << 20
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
		if v := os.Getenv(MaxSizeEnv); v != "" {
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Sign() <= 0 {
				return l, fmt.Errorf("%s=%q: use a positive size such as 512Mi or 2Gi", MaxSizeEnv, v)
			}
			l.MaxTotalBytes = q.Value()
		}
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 200_000
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = 200
	}
	return l, nil
}

// overTotal says that the bundle name is over MaxTotalBytes (what: how the reader found out), and how to
// read it anyway.
func (l Limits) overTotal(name, what string) error {
	return fmt.Errorf("%s: %w: %s, the limit on a bundle's files (a 5,000-node bundle without logs has 80 MB); "+
		"if it is a genuine bundle, raise the limit by setting %s, for example %s=%s",
		name, ErrTooLarge, what, MaxSizeEnv, MaxSizeEnv, quantityString(2*l.MaxTotalBytes))
}

// sizeString is n bytes for people: "256 MiB", "1 GiB", or "1000 bytes".
func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// quantityString is n bytes as MaxSizeEnv takes it: "512Mi".
func quantityString(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// Errors a reader returns; each is wrapped with the file and entry concerned.
var (
	// ErrNotBundle: the file is not a gzip-compressed tar or a bundle directory.
	ErrNotBundle = errors.New("not a support bundle")
	// ErrCorrupt: the file ends early or its compressed data is damaged.
	ErrCorrupt = errors.New("the bundle is truncated or corrupt")
	// ErrUnsafeEntry: an entry could write outside the bundle's directory or is not a plain file.
	ErrUnsafeEntry = errors.New("unsafe entry")
	// ErrTooLarge: an entry or the whole bundle is over the reader's limits.
	ErrTooLarge = errors.New("over the size limit")
	// ErrNewerFormat: the bundle was written by a newer lvms.
	ErrNewerFormat = errors.New("written in a newer bundle format")
)

// Files are the files of a bundle, by slash-separated path relative to the bundle's root.
type Files struct {
	// Source is the file or directory read.
	Source string
	data   map[string][]byte
}

// NewFiles holds files that are already in memory (a collection in progress, tests), by slash-separated
// path relative to the bundle's root.
func NewFiles(source string, data map[string][]byte) *Files {
	return &Files{Source: source, data: data}
}

// Names returns every path, sorted.
func (f *Files) Names() []string {
	out := make([]string, 0, len(f.data))
	for n := range f.data {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Get returns a file's content.
func (f *Files) Get(name string) ([]byte, bool) {
	b, ok := f.data[name]
	return b, ok
}

// Size is the total size of the files.
func (f *Files) Size() int64 {
	var n int64
	for _, b := range f.data {
		n += int64(len(b))
	}
	return n
}

// Open reads a bundle: a .tar.gz written by `lvms bundle`, or a directory (must-gather output). Nothing is
// written anywhere. Entries that are not plain files or directories, or whose path is absolute or climbs
// out with "..", make it fail with ErrUnsafeEntry; the bundle's root is the directory holding the version
// file (at the top, or one or two levels down as must-gather and tar roots put it).
func Open(name string, lim Limits) (*Files, error) {
	lim, err := lim.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("read bundle %s: %w", name, err)
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("open bundle: %w", err)
	}
	var raw map[string][]byte
	if st.IsDir() {
		raw, err = readDir(name, lim)
	} else {
		raw, err = readTarGz(name, lim)
	}
	if err != nil {
		return nil, err
	}
	root, err := findRoot(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	files := &Files{Source: name, data: map[string][]byte{}}
	for p, b := range raw {
		if rel, ok := strings.CutPrefix(p, root); ok {
			files.data[rel] = b
		}
	}
	return files, nil
}

// findRoot returns the prefix ("" or "dir/" or "dir/sub/") of the directory holding the version file. A
// must-gather directory may hold several images' output: a root whose version file names lvms and which has a
// manifest wins, then the shallowest.
func findRoot(files map[string][]byte) (string, error) {
	var roots []string
	for p := range files {
		if path.Base(p) == FileVersion && strings.Count(p, "/") <= 2 {
			roots = append(roots, strings.TrimSuffix(p, FileVersion))
		}
	}
	if len(roots) == 0 {
		return "", fmt.Errorf("%w: there is no %q file (a bundle written by `lvms bundle` or `lvms gather` has one)", ErrNotBundle, FileVersion)
	}
	ours := func(root string) bool {
		_, hasManifest := files[root+FileManifest]
		return hasManifest && strings.HasPrefix(string(files[root+FileVersion]), Product+"\n")
	}
	slices.SortFunc(roots, func(a, b string) int {
		if oa, ob := ours(a), ours(b); oa != ob {
			if oa {
				return -1
			}
			return 1
		}
		if d := len(a) - len(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return roots[0], nil
}

func readTarGz(name string, lim Limits) (map[string][]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open bundle: %w", err)
	}
	defer func() { _ = f.Close() }()
	compressed := &countingReader{r: f}
	br := bufio.NewReader(compressed)
	if magic, _ := br.Peek(2); len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return nil, fmt.Errorf("%s: %w: it is not gzip-compressed (a bundle is the .tar.gz that `lvms bundle` writes, or a must-gather directory)", name, ErrNotBundle)
	}
	gz, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrCorrupt, err)
	}
	// The tar reader also reads what it skips (directory data, padding): the guard sees every byte.
	tr := tar.NewReader(&expansionGuard{r: gz, compressed: compressed, lim: lim, name: name})
	out := map[string][]byte{}
	var total int64
	for entries := 0; ; entries++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w after %d entries (%v): copy the bundle again", name, ErrCorrupt, entries, err)
		}
		if entries >= lim.MaxEntries {
			return nil, fmt.Errorf("%s: %w: more than %d entries", name, ErrTooLarge, lim.MaxEntries)
		}
		clean, err := entryName(h.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, fmt.Errorf("%s: %w %q: links are not allowed in a bundle (it links to %q)", name, ErrUnsafeEntry, h.Name, h.Linkname)
		default:
			return nil, fmt.Errorf("%s: %w %q: only plain files and directories are allowed in a bundle (type %q)", name, ErrUnsafeEntry, h.Name, string(h.Typeflag))
		}
		if h.Size > lim.MaxEntryBytes {
			return nil, fmt.Errorf("%s: entry %q is %d bytes: %w of %d bytes per file", name, h.Name, h.Size, ErrTooLarge, lim.MaxEntryBytes)
		}
		// Checked before reading, so that what is held never passes the limit.
		cost := h.Size + int64(len(clean))
		if total+cost > lim.MaxTotalBytes {
			return nil, lim.overTotal(name, fmt.Sprintf("its files add up to more than %s", sizeString(lim.MaxTotalBytes)))
		}
		if _, dup := out[clean]; dup {
			return nil, fmt.Errorf("%s: %w %q: the bundle holds it twice", name, ErrUnsafeEntry, h.Name)
		}
		data, err := readEntry(tr, h.Size)
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w in entry %q (%v): copy the bundle again", name, ErrCorrupt, h.Name, err)
		}
		total += cost
		out[clean] = data
	}
	if _, err := io.Copy(io.Discard, io.LimitReader(gz, 1<<20)); err != nil {
		return nil, fmt.Errorf("%s: %w at the end (%v): copy the bundle again", name, ErrCorrupt, err)
	}
	return out, nil
}

// readEntry reads an entry of size bytes into one buffer of that size: a file costs its size, not the doubling
// of a growing buffer. The caller has checked size against the limits; a header claiming more than the
// stream holds costs that allocation once, and the read fails.
func readEntry(r io.Reader, size int64) ([]byte, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	return data, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// expansionGuard stops reading a compressed bundle as soon as it expands beyond what any real bundle does:
// past the total limit (with room for tar headers), or past MaxRatio times its compressed size. A
// decompression bomb is refused after ratioFloor bytes at most, not after gigabytes.
type expansionGuard struct {
	r          io.Reader
	compressed *countingReader
	lim        Limits
	name       string
	n          int64
}

func (g *expansionGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	g.n += int64(n)
	if g.n > g.lim.MaxTotalBytes+int64(g.lim.MaxEntries)*1024+ratioFloor {
		return n, g.lim.overTotal(g.name, fmt.Sprintf("it expands to more than %d bytes, past %s", g.n, sizeString(g.lim.MaxTotalBytes)))
	}
	if g.n > ratioFloor && g.n > g.lim.MaxRatio*max(g.compressed.n, 1) {
		return n, fmt.Errorf("%s: %w: its %d compressed bytes expand to more than %d bytes, over %d times their size; a bundle expands 5 to 30 times, this looks like a decompression bomb "+
			"(if it is a genuine bundle, unpack it with tar and read the directory, which has no ratio limit)",
			g.name, ErrTooLarge, g.compressed.n, g.n, g.lim.MaxRatio)
	}
	return n, err
}

// entryName checks a tar entry name and returns it cleaned: relative, slash-separated, inside the bundle.
func entryName(name string) (string, error) {
	n := strings.TrimSuffix(name, "/")
	switch {
	case n == "" || strings.ContainsRune(n, 0):
		return "", fmt.Errorf("%w %q: empty name", ErrUnsafeEntry, name)
	case strings.HasPrefix(n, "/") || filepath.IsAbs(n) || (len(n) > 1 && n[1] == ':'):
		return "", fmt.Errorf("%w %q: absolute paths are not allowed in a bundle", ErrUnsafeEntry, name)
	case strings.Contains(n, "\\"):
		return "", fmt.Errorf("%w %q: backslashes are not allowed in bundle paths", ErrUnsafeEntry, name)
	}
	for _, seg := range strings.Split(n, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w %q: it climbs out of the bundle with \"..\"", ErrUnsafeEntry, name)
		}
	}
	clean := path.Clean(n)
	if !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%w %q: not a path inside the bundle", ErrUnsafeEntry, name)
	}
	return clean, nil
}

func readDir(dir string, lim Limits) (map[string][]byte, error) {
	out := map[string][]byte{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("%w %q: links are not allowed in a bundle", ErrUnsafeEntry, rel)
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%w %q: only plain files and directories are allowed in a bundle", ErrUnsafeEntry, rel)
		}
		if len(out) >= lim.MaxEntries {
			return fmt.Errorf("%w: more than %d files", ErrTooLarge, lim.MaxEntries)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > lim.MaxEntryBytes {
			return fmt.Errorf("file %q is %d bytes: %w of %d bytes per file", rel, info.Size(), ErrTooLarge, lim.MaxEntryBytes)
		}
		cost := info.Size() + int64(len(rel))
		if total+cost > lim.MaxTotalBytes {
			return errOverTotal
		}
		data, err := readFile(p, info.Size())
		if err != nil {
			return fmt.Errorf("%w: file %q (%v): copy the bundle again", ErrCorrupt, rel, err)
		}
		total += cost
		out[rel] = data
		return nil
	})
	if errors.Is(err, errOverTotal) {
		return nil, lim.overTotal(dir, fmt.Sprintf("its files add up to more than %s", sizeString(lim.MaxTotalBytes)))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return out, nil
}

// readFile reads the size bytes a directory listing gave for the file at p, however it changes meanwhile.
func readFile(p string, size int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readEntry(f, size)
}

// errOverTotal stops walking a directory over MaxTotalBytes.
var errOverTotal = errors.New("over the total limit")

// Extract writes the files of the bundle at name into dir, which must not exist yet or be empty. The bundle
// is read and checked completely first (Open), so an unsafe or broken bundle writes nothing at all; files
// are created exclusively, never through links.
func Extract(name, dir string, lim Limits) ([]string, error) {
	files, err := Open(name, lim)
	if err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("extract into %s: the directory is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("extract into %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("extract into %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("extract into %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()
	names := files.Names()
	for _, n := range names {
		if err := writeUnder(root, n, files.data[n]); err != nil {
			return nil, fmt.Errorf("extract %s into %s: %w", n, dir, err)
		}
	}
	return names, nil
}

// writeUnder creates name (slash-separated) under root: os.Root refuses paths that leave it, through ".."
// or links.
func writeUnder(root *os.Root, name string, data []byte) error {
	segs := strings.Split(name, "/")
	for i := 1; i < len(segs); i++ {
		if err := root.Mkdir(path.Join(segs[:i]...), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
