package csinode_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

// FuzzNodeRequests sends node-service requests with arbitrary volume IDs and paths. A path is either the
// fuzzer's text put under a work directory without cleaning it (so "../x" climbs out) or, when it is not
// absolute, the text itself. Properties: a volume ID that is not a plain LV name, and a publish or unpublish
// target that is not absolute and clean, are refused with InvalidArgument, and nothing outside the work
// directory is touched (a file and an empty directory beside it stay). Stats and expand only read the path
// (and answer NotFound for one that does not exist, as csi-sanity expects).
func FuzzNodeRequests(f *testing.F) {
	for _, seed := range []struct {
		id, path string
		op       uint8
	}{
		{"0b0c7f4e-1111-4a4a-9d9d-000000000001", "mnt", 0},
		{"0b0c7f4e-1111-4a4a-9d9d-000000000001", "../keep", 1},
		{"../../sda", "mnt", 1},
		{"vol", "../empty", 1},
		{"vol", "a/./b", 2},
		{"vol", "relative/path", 7},
		{"0b0c7f4e-1111-4a4a-9d9d-000000000001", "block", 4},
		{"..", "x//y", 3},
	} {
		f.Add(seed.id, seed.path, seed.op)
	}
	fx := newFixture(f, driver.New(false))
	root := f.TempDir()
	work := filepath.Join(root, "work")
	keep, empty := filepath.Join(root, "keep"), filepath.Join(root, "empty")
	for _, err := range []error{os.Mkdir(work, 0o755), os.WriteFile(keep, []byte("x"), 0o600), os.Mkdir(empty, 0o755)} {
		if err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, id, text string, op uint8) {
		path := work + "/" + text
		if op&4 != 0 && text != "" && !filepath.IsAbs(text) {
			path = text // relative: never valid, never resolved against the test's working directory
		}
		badID := id == "" || id == "." || id == ".." || len(id) > 127 || strings.ContainsAny(id, "/\x00") || strings.HasPrefix(id, "-")
		badPath := op%4 < 2 && (!filepath.IsAbs(path) || filepath.Clean(path) != path || strings.ContainsRune(path, 0))
		err := call(fx, op, id, path)
		if (badID || badPath) && status.Code(err) != codes.InvalidArgument {
			t.Errorf("op %d, volume ID %q, path %q: got %v, want InvalidArgument", op%4, id, path, err)
		}
		if _, err := os.Stat(keep); err != nil {
			t.Fatalf("op %d, volume ID %q, path %q: the file beside the work directory is gone: %v", op%4, id, path, err)
		}
		if _, err := os.Stat(empty); err != nil {
			t.Fatalf("op %d, volume ID %q, path %q: the empty directory beside the work directory is gone: %v", op%4, id, path, err)
		}
	})
}

func call(fx *fixture, op uint8, id, path string) error {
	ctx := context.Background()
	var err error
	switch op % 4 {
	case 0:
		c := mountCap("xfs")
		if op&8 != 0 {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		}
		_, err = fx.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: path, VolumeCapability: c})
	case 1:
		_, err = fx.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: path})
	case 2:
		_, err = fx.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: path})
	case 3:
		_, err = fx.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: path})
	}
	return err
}
