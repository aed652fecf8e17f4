package bundle

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrSizeLimit is returned by WriteFile when a file would take the bundle past its size limit.
var ErrSizeLimit = errors.New("the bundle reached its size limit")

// Writer writes the files of one bundle. It is safe for concurrent use.
type Writer struct {
	sink     sink
	maxBytes int64
	mtime    time.Time

	mu      sync.Mutex
	written int64
	files   map[string]bool
	closed  bool
}

// sink stores files: a tar.gz stream or a directory.
type sink interface {
	put(name string, data []byte, mtime time.Time) error
	close() error
}

// NewTarWriter writes a gzip-compressed tar to w; every entry is under the directory root (for example
// "lvms-bundle-20261122T100000Z"). maxBytes bounds the collected data (0: no bound); mtime stamps entries.
func NewTarWriter(w io.Writer, root string, maxBytes int64, mtime time.Time) (*Writer, error) {
	if !safeSegment(root) {
		return nil, fmt.Errorf("bundle root %q is not a directory name", root)
	}
	gz := gzip.NewWriter(w)
	return newWriter(&tarSink{gz: gz, tw: tar.NewWriter(gz), root: root, dirs: map[string]bool{}}, maxBytes, mtime), nil
}

// NewDirWriter writes files under dir (the must-gather output directory), which must exist.
func NewDirWriter(dir string, maxBytes int64, mtime time.Time) (*Writer, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("bundle directory %s is not a directory", dir)
	}
	return newWriter(&dirSink{dir: dir}, maxBytes, mtime), nil
}

func newWriter(s sink, maxBytes int64, mtime time.Time) *Writer {
	return &Writer{sink: s, maxBytes: maxBytes, mtime: mtime.UTC(), files: map[string]bool{}}
}

// WriteFile adds a collected file. It returns ErrSizeLimit, writing nothing, when the file would take the
// collected data past the size limit; smaller files may still fit.
func (w *Writer) WriteFile(name string, data []byte) error { return w.write(name, data, true) }

// WriteMeta adds a file about the bundle itself (version, manifest, analysis, redactions): it is not
// counted against the size limit, so a bundle that reached it still says so.
func (w *Writer) WriteMeta(name string, data []byte) error { return w.write(name, data, false) }

func (w *Writer) write(name string, data []byte, counted bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("write %s: the bundle is closed", name)
	}
	if w.files[name] {
		return fmt.Errorf("write %s: the bundle already has this file", name)
	}
	if counted && w.maxBytes > 0 && w.written+int64(len(data)) > w.maxBytes {
		return fmt.Errorf("write %s (%d bytes): %w of %d bytes", name, len(data), ErrSizeLimit, w.maxBytes)
	}
	if err := w.sink.put(name, data, w.mtime); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	w.files[name] = true
	if counted {
		w.written += int64(len(data))
	}
	return nil
}

// Written is the number of collected bytes written so far.
func (w *Writer) Written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// Close finishes the bundle.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.sink.close()
}

// checkName accepts relative slash-separated paths without empty, . or .. segments, and nothing the
// reader would refuse (backslashes, drive letters): a bundle lvms writes is one lvms can read.
func checkName(name string) error {
	if clean, err := entryName(name); err != nil || clean != name || clean == "." || strings.HasSuffix(name, "/") {
		return fmt.Errorf("%q is not a relative path inside the bundle", name)
	}
	return nil
}

type tarSink struct {
	gz   *gzip.Writer
	tw   *tar.Writer
	root string
	dirs map[string]bool
}

func (t *tarSink) put(name string, data []byte, mtime time.Time) error {
	full := path.Join(t.root, name)
	// Directory entries first, once each, so extraction tools create them with sane modes.
	var missing []string
	for d := path.Dir(full); d != "." && !t.dirs[d]; d = path.Dir(d) {
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: missing[i] + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		t.dirs[missing[i]] = true
	}
	if err := t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: full, Mode: 0o644, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := t.tw.Write(data)
	return err
}

func (t *tarSink) close() error {
	return errors.Join(t.tw.Close(), t.gz.Close())
}

type dirSink struct{ dir string }

func (d *dirSink) put(name string, data []byte, mtime time.Time) error {
	full := filepath.Join(d.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(full, mtime, mtime)
}

func (d *dirSink) close() error { return nil }
