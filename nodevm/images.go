package nodevm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/lvms-dev/lvms/image"
)

// Images the nodes import instead of pulling (there is no registry): the product's image from `make image`
// under a test tag, the pod sandbox, and a busybox for workloads.
const (
	// LVMSImage is what the install overrides the image reference with. Not ":latest", so that kubelets
	// use the imported image (IfNotPresent) and never try a registry.
	LVMSImage = "lvms.test/lvms:e2e"
	// PauseImage is containerd's default sandbox image name, served by nodevm/pause.
	PauseImage = "registry.k8s.io/pause:3.10.1"
	// BusyboxImage has Debian's static busybox with every applet linked in /bin.
	BusyboxImage = "lvms.test/busybox:e2e"
)

// ErrNoProductImage: the tier installs the image `make image` builds (make test and make test-node build it).
var ErrNoProductImage = errors.New("no product image in bin/image/oci: run `make image` first (make run and make test-node do)")

// epoch dates the test images: fixed, so that they are the same on every run.
var epoch = time.Unix(0, 0).UTC()

// WriteImages writes the three image archives into dir (docker archive format, which ctr imports with
// their tags) and returns their paths; root is the repository (the pause binary is built from it).
func WriteImages(dir, root string) ([]string, error) {
	lvms, err := layoutImage(filepath.Join(root, "bin", "image", "oci"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoProductImage, err)
	}
	pause, err := pauseImage(root, dir)
	if err != nil {
		return nil, err
	}
	busybox, err := busyboxImage()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, im := range []struct {
		ref string
		img v1.Image
	}{{LVMSImage, lvms}, {PauseImage, pause}, {BusyboxImage, busybox}} {
		ref, err := name.NewTag(im.ref)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(im.ref)+".tar")
		if err := tarball.WriteToFile(p, ref, im.img); err != nil {
			return nil, fmt.Errorf("write %s: %w", im.ref, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// layoutImage is the one image of an OCI layout.
func layoutImage(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d images, want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// pauseImage builds nodevm/pause (static) and wraps it in an image.
func pauseImage(root, dir string) (v1.Image, error) {
	bin := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./nodevm/pause")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the pause binary: %v: %s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	fs := image.NewFiles()
	fs.File("pause", 0o755, b)
	return image.Scratch(epoch, v1.Config{Entrypoint: []string{"/pause"}}, fs)
}

// busyboxImage is Debian's busybox-static (a dependency of the VM lane) with its applets.
func busyboxImage() (v1.Image, error) {
	const bb = "/bin/busybox"
	b, err := os.ReadFile(bb)
	if err != nil {
		return nil, fmt.Errorf("read %s (Debian package busybox-static): %w", bb, err)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets: %w", err)
	}
	fs := image.NewFiles()
	fs.Dir("bin", 0o755)
	fs.Dir("tmp", 0o1777)
	fs.File("bin/busybox", 0o755, b)
	for _, applet := range strings.Fields(string(bytes.TrimSpace(out))) {
		if applet != "busybox" {
			fs.Symlink("bin/"+applet, "busybox")
		}
	}
	return image.Scratch(epoch, v1.Config{Cmd: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}}, fs)
}
