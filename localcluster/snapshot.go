package localcluster

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// InstallSnapshotCRDs installs the VolumeSnapshot CRDs shipped in the external-snapshotter client module (a
// dependency of ours, so in the module cache) and waits until the API server serves them.
func InstallSnapshotCRDs(cfg *rest.Config) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-csi/external-snapshotter/client/v8").Output()
	if err != nil {
		return fmt.Errorf("find the external-snapshotter client module for the VolumeSnapshot CRDs: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
	var paths []string
	for _, kind := range []string{"volumesnapshotclasses", "volumesnapshotcontents", "volumesnapshots"} {
		paths = append(paths, filepath.Join(dir, "snapshot.storage.k8s.io_"+kind+".yaml"))
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("install the VolumeSnapshot CRDs: %w", err)
	}
	return nil
}
