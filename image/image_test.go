package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/lvms-dev/lvms/buildcache"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/testtier"
)

// TestImage_BuildsReproduciblyAndRunsUnderRunc builds the image as `make image` does (static lvms, the pinned
// packages), twice, and runs the result the way a container runtime would: the oci-archive unpacked with
// umoci, each command run with runc in its own, empty network namespace.
func TestImage_BuildsReproduciblyAndRunsUnderRunc(t *testing.T) {
	testtier.Needs(t, "root on the host (runc) and two builds of the image")
	for _, tool := range []string{"dpkg-deb", "apt-get", "umoci", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			testtier.Unavailablef(t, "%s is not installed (Debian packages dpkg, apt, umoci, runc; `make deps` installs them)", tool)
		}
	}
	if os.Geteuid() != 0 {
		testtier.Unavailable(t, "running the image with runc needs root")
	}
	ctx := context.Background()
	root := testenv.RepoRoot()
	dir := t.TempDir()
	bin := filepath.Join(dir, "lvms-static")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=image-test", "-o", bin, "./cmd/lvms")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build lvms: %v\n%s", err, out)
	}
	f, err := os.Open(filepath.Join(root, "image", "packages.lock"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := ParseLock(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	cache, err := buildcache.Dir()
	if err != nil {
		t.Fatal(err)
	}
	debs, err := Fetch(ctx, filepath.Join(cache, "debs"), pkgs, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Binary: bin, Debs: debs, Packages: pkgs, Version: "image-test", Revision: "abc123", Created: time.Unix(1700000000, 0).UTC()}
	img, err := Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds from the same inputs: %s and %s", d1, d2)
	}

	oci := filepath.Join(dir, "oci")
	if err := WriteLayout(oci, "image-test", img); err != nil {
		t.Fatal(err)
	}
	var a1, a2 bytes.Buffer
	if err := WriteArchive(oci, &a1, opts.Created); err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(oci, &a2, opts.Created); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a1.Bytes(), a2.Bytes()) {
		t.Error("two oci-archives of the same layout differ")
	}
	if p, err := layout.FromPath(oci); err != nil {
		t.Fatal(err)
	} else if idx, _ := p.ImageIndex(); idx == nil {
		t.Fatal("no index in the layout")
	}

	// What a runtime sees: unpack the archive, then the layout, with umoci.
	unpacked := filepath.Join(dir, "archive")
	untar(t, &a1, unpacked)
	bundle := filepath.Join(dir, "bundle")
	if out, err := exec.Command("umoci", "unpack", "--image", unpacked+":image-test", bundle).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v\n%s", err, out)
	}
	cfg := readJSON(t, filepath.Join(bundle, "config.json"))
	process := cfg["process"].(map[string]any)
	user := process["user"].(map[string]any)
	if user["uid"] != float64(65532) || user["gid"] != float64(65532) {
		t.Errorf("the image runs as %v, want 65532:65532", user)
	}
	if args := process["args"].([]any); len(args) != 1 || args[0] != Entrypoint {
		t.Errorf("entrypoint %v, want %s", args, Entrypoint)
	}
	var newNetNS bool
	for _, ns := range cfg["linux"].(map[string]any)["namespaces"].([]any) {
		m := ns.(map[string]any)
		newNetNS = newNetNS || (m["type"] == "network" && m["path"] == nil)
	}
	if !newNetNS {
		t.Fatal("the runtime config shares a network namespace; the commands must run without network")
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	labels := cf.Config.Labels
	if labels["org.opencontainers.image.version"] != "image-test" || labels["org.opencontainers.image.revision"] != "abc123" ||
		labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("labels %v", labels)
	}
	for _, p := range pkgs {
		if !strings.Contains(" "+labels[PackagesLabel]+" ", " "+p.String()+" ") {
			t.Errorf("label %s lacks %s", PackagesLabel, p)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{Entrypoint, "version"}, "lvms image-test"},
		{[]string{"lvm", "version"}, "LVM version:     2.03"},
		{[]string{"lsblk", "--version"}, "lsblk from util-linux"},
		{[]string{"mkfs.xfs", "-V"}, "mkfs.xfs version"},
		{[]string{"mkfs.ext4", "-V"}, "mke2fs"},
		{[]string{"mkfs.btrfs", "--version"}, "btrfs-progs"},
		{[]string{"thin_check", "-V"}, "0."},
		{[]string{"sanlock", "version"}, "3."},
		{[]string{"nsenter", "--version"}, "nsenter from util-linux"},
		{[]string{"mount", "--version"}, "mount from util-linux"}, // the CSI node service mounts in the container
		{[]string{Gather, "--help"}, "must-gather"},
	} {
		out := runc(t, bundle, cfg, tc.args)
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s in the image printed:\n%s\nwant %q in it", strings.Join(tc.args, " "), out, tc.want)
		}
	}
}

// runc runs args in the unpacked bundle (no terminal, the image's user) and returns the output.
func runc(t *testing.T, bundle string, cfg map[string]any, args []string) string {
	t.Helper()
	process := cfg["process"].(map[string]any)
	process["args"], process["terminal"] = args, false
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	id := "lvms-image-test-" + filepath.Base(filepath.Dir(bundle))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runc", "run", "--bundle", bundle, id)
	out, err := cmd.CombinedOutput()
	_ = exec.Command("runc", "delete", "--force", id).Run() // a killed run leaves its container behind
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("runc %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func untar(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
