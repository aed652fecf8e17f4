// Command mkbundle writes the OLM bundle (bundle/, package deploy/olm) and builds the bundle image: a
// scratch image holding manifests/ and metadata/ with the bundle annotations as labels, as an OCI layout
// (bin/bundle/oci) and an oci-archive (bin/bundle/lvms-bundle.oci.tar). `make generate` runs
// `mkbundle generate`, `make bundle` both.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lvms-dev/lvms/deploy/olm"
	"github.com/lvms-dev/lvms/image"
)

func main() {
	fs := flag.NewFlagSet("mkbundle", flag.ExitOnError)
	version := fs.String("version", "0.1.0", "operator version (semver) of the CSV")
	img := fs.String("image", "", "operator image (default: the overlay's)")
	dir := fs.String("dir", "bundle", "bundle directory")
	out := fs.String("out", "bin/bundle", "bundle image output directory")
	epoch := fs.Int64("source-date-epoch", 0, "creation time of the bundle image, seconds since 1970")
	if len(os.Args) < 2 || (os.Args[1] != "generate" && os.Args[1] != "image") {
		fmt.Fprintln(os.Stderr, "usage: mkbundle generate|image [flags]")
		os.Exit(2)
	}
	_ = fs.Parse(os.Args[2:])
	var err error
	if os.Args[1] == "generate" {
		err = generate(*dir, *version, *img)
	} else {
		err = buildImage(*dir, *out, *version, time.Unix(*epoch, 0).UTC())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkbundle:", err)
		os.Exit(1)
	}
}

// generate writes the bundle's files and removes files it no longer has.
func generate(dir, version, img string) error {
	files, err := olm.Generate(olm.Options{Root: ".", Version: version, Image: img})
	if err != nil {
		return err
	}
	for _, sub := range []string{"manifests", "metadata"} {
		old, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		for _, p := range old {
			rel, _ := filepath.Rel(dir, p)
			if _, keep := files[filepath.ToSlash(rel)]; !keep {
				if err := os.Remove(p); err != nil {
					return err
				}
			}
		}
	}
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildImage packs dir's manifests/ and metadata/ into the bundle image.
func buildImage(dir, out, version string, created time.Time) error {
	bundle, n, err := olm.Image(dir, created)
	if err != nil {
		return err
	}
	layout := filepath.Join(out, "oci")
	if err := image.WriteLayout(layout, version, bundle); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "lvms-bundle.oci.tar"))
	if err != nil {
		return err
	}
	if err := image.WriteArchive(layout, f, created); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	digest, _ := bundle.Digest()
	fmt.Printf("bundle image %s: %d files\n  layout  %s\n  archive %s\n", digest, n, layout, f.Name())
	return nil
}
