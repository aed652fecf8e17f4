package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"
)

// entry is one file of the merged root file system.
type entry struct {
	hdr  tar.Header
	data []byte
}

// RootFS is a root file system being assembled from Debian packages and extra files.
type RootFS struct {
	entries map[string]*entry
}

// NewRootFS starts an empty root file system with Debian's merged /usr (bin, sbin, lib, lib64 are links into
// /usr, as usrmerge makes them), /tmp, and the users the image runs as.
func NewRootFS() *RootFS {
	r := &RootFS{entries: map[string]*entry{}}
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		r.Symlink(d, "usr/"+d)
	}
	r.Dir("tmp", 0o1777)
	r.Dir("must-gather", 0o777) // oc adm must-gather mounts its volume here
	r.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/usr/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin\n"))
	r.File("etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n"))
	r.Dir("home/nonroot", 0o755).hdr.Uid = 65532
	return r
}

// usrMerged maps a path of a package onto the merged /usr: bookworm packages still ship /bin, /sbin and /lib.
func usrMerged(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return "usr/" + p
		}
	}
	return p
}

// dropped are paths of packages an image does not need: documentation except the copyright files, manual
// pages, translations, and the init system's units and scripts.
func dropped(p string) bool {
	switch {
	case strings.HasPrefix(p, "usr/share/doc/"):
		return path.Base(p) != "copyright" && strings.Count(p, "/") > 3
	case strings.HasPrefix(p, "usr/share/man/"), strings.HasPrefix(p, "usr/share/info/"),
		strings.HasPrefix(p, "usr/share/locale/"), strings.HasPrefix(p, "usr/share/lintian/"),
		strings.HasPrefix(p, "usr/lib/systemd/"), strings.HasPrefix(p, "etc/init.d/"),
		strings.HasPrefix(p, "etc/systemd/"):
		return true
	}
	return false
}

// AddTar adds the entries of a tar stream (a package's data), mapped onto the merged /usr. A later entry
// replaces an earlier file of the same path; directories merge.
func (r *RootFS) AddTar(rd io.Reader) error {
	tr := tar.NewReader(rd)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read package data: %w", err)
		}
		p := usrMerged(h.Name)
		if p == "" || p == "." || dropped(p) {
			continue
		}
		e := &entry{hdr: tar.Header{Name: p, Typeflag: h.Typeflag, Mode: h.Mode, Uid: h.Uid, Gid: h.Gid, Linkname: h.Linkname}}
		switch h.Typeflag {
		case tar.TypeDir:
			if old, ok := r.entries[p]; ok && old.hdr.Typeflag == tar.TypeDir {
				continue
			}
		case tar.TypeReg:
			if e.data, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("read %s: %w", h.Name, err)
			}
		case tar.TypeLink:
			e.hdr.Linkname = usrMerged(h.Linkname)
		case tar.TypeSymlink:
		default:
			continue // devices and fifos have no place in an image
		}
		r.entries[p] = e
	}
}

// AddDeb adds a Debian package's files (dpkg-deb --fsys-tarfile: maintainer scripts are not run).
func (r *RootFS) AddDeb(ctx context.Context, file string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w: %s", file, err, stderr.String())
	}
	if err := r.AddTar(bytes.NewReader(out)); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// File adds a regular file.
func (r *RootFS) File(p string, mode int64, data []byte) *entry {
	e := &entry{hdr: tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: mode}, data: data}
	r.entries[p] = e
	return e
}

// Dir adds a directory.
func (r *RootFS) Dir(p string, mode int64) *entry {
	e := &entry{hdr: tar.Header{Name: p, Typeflag: tar.TypeDir, Mode: mode}}
	r.entries[p] = e
	return e
}

// Symlink adds a symbolic link.
func (r *RootFS) Symlink(p, target string) {
	r.entries[p] = &entry{hdr: tar.Header{Name: p, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}
}

// Tar writes the file system as a tar stream: parents before children, sorted, every time set to mtime,
// no user or group names, so equal contents give equal bytes. Missing parent directories are added.
func (r *RootFS) Tar(w io.Writer, mtime time.Time) error {
	for p := range r.entries {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := r.entries[d]; !ok {
				r.Dir(d, 0o755)
			}
		}
	}
	names := make([]string, 0, len(r.entries))
	for p := range r.entries {
		names = append(names, p)
	}
	slices.Sort(names)
	tw := tar.NewWriter(w)
	for _, p := range names {
		e := r.entries[p]
		h := e.hdr
		h.ModTime, h.Format = mtime, tar.FormatPAX
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.Size = int64(len(e.data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(&h); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return fmt.Errorf("write %s: %w", p, err)
			}
		}
	}
	return tw.Close()
}

// Has reports whether the file system holds p.
func (r *RootFS) Has(p string) bool { _, ok := r.entries[p]; return ok }
