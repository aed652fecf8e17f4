package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Labels of the image besides the OCI ones.
const (
	// PackagesLabel lists the Debian packages of the root file system, "name=version" separated by spaces.
	PackagesLabel = "io.lvms.debian-packages"
	// User is the image's default user (the operator's; the node agent's DaemonSet runs as root).
	User = "65532:65532"
	// Entrypoint is the lvms binary; Gather the must-gather entrypoint (a link to it).
	Entrypoint = "/usr/bin/lvms"
	Gather     = "/usr/bin/gather"
)

// Options are the inputs of a build; equal inputs give an equal image digest.
type Options struct {
	// Binary is the static lvms binary.
	Binary string
	// Debs are the package files, in the order of Packages.
	Debs     []string
	Packages []Package
	// Version and Revision label the image (org.opencontainers.image.version, .revision).
	Version, Revision string
	// Created is the image's creation time and every file's modification time (SOURCE_DATE_EPOCH).
	Created time.Time
}

// Build assembles the image: one layer with the Debian root file system, one with lvms, so a new binary
// reuses the packages' layer.
func Build(ctx context.Context, o Options) (v1.Image, error) {
	if len(o.Debs) != len(o.Packages) {
		return nil, fmt.Errorf("%d package files for %d packages", len(o.Debs), len(o.Packages))
	}
	base := NewRootFS()
	for _, deb := range o.Debs {
		if err := base.AddDeb(ctx, deb); err != nil {
			return nil, err
		}
	}
	for _, tool := range []string{"usr/sbin/lvm", "usr/bin/lsblk", "usr/bin/nsenter", "usr/sbin/mkfs.xfs", "usr/bin/mount", "usr/bin/umount"} {
		if !base.Has(tool) {
			return nil, fmt.Errorf("the packages install no %s: check packages.lock", tool)
		}
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("the lvms binary: %w (build it with `make build-static`)", err)
	}
	top := NewFiles()
	top.File(strings.TrimPrefix(Entrypoint, "/"), 0o755, bin)
	top.Symlink(strings.TrimPrefix(Gather, "/"), "lvms")
	top.Symlink("lvms", strings.TrimPrefix(Entrypoint, "/")) // the path older manifests use

	names := make([]string, len(o.Packages))
	for i, p := range o.Packages {
		names[i] = p.String()
	}
	slices.Sort(names)
	return Scratch(o.Created, v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "lvms",
			"org.opencontainers.image.description": "LVMS: LVM storage for Kubernetes, OpenShift and MicroShift (operator, node agent, CSI driver, console, must-gather)",
			"org.opencontainers.image.version":     o.Version,
			"org.opencontainers.image.revision":    o.Revision,
			"org.opencontainers.image.licenses":    "Apache-2.0",
			"org.opencontainers.image.source":      "https://github.com/lvms-dev/lvms",
			PackagesLabel:                          strings.Join(names, " "),
		},
	}, base, top)
}

// Scratch is an OCI image of the given layers (one per file system, in order) and configuration, created
// at created: the same inputs give the same digest.
func Scratch(created time.Time, config v1.Config, layers ...*RootFS) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, fsys := range layers {
		var buf bytes.Buffer
		if err := fsys.Tar(&buf, created); err != nil {
			return nil, err
		}
		b := buf.Bytes()
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
			tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: created},
			CreatedBy: "lvms image builder (package image)"}}); err != nil {
			return nil, fmt.Errorf("append layer: %w", err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created, cf.Config = "amd64", "linux", v1.Time{Time: created}, config
	return mutate.ConfigFile(img, cf)
}

// NewFiles starts an empty file system for a layer (NewRootFS adds what a runnable root needs).
func NewFiles() *RootFS { return &RootFS{entries: map[string]*entry{}} }

// WriteLayout writes img as an OCI image layout in dir (replacing what was there), tagged ref.
func WriteLayout(dir, ref string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// WriteArchive writes the layout in dir as an oci-archive tarball (what podman, skopeo and buildah read
// as oci-archive:FILE), entries sorted and times fixed.
func WriteArchive(dir string, w io.Writer, mtime time.Time) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(files)
	tw := tar.NewWriter(w)
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg, Size: st.Size()}
		if st.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !st.IsDir() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	return tw.Close()
}
