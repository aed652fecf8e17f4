package provisioner_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/lvms-dev/lvms/e2e/testenv"
)

var env *testenv.Env

// TestMain starts a real API server with the LVMS CRDs plus the VolumeSnapshot and VolumeGroupSnapshot
// CRDs shipped in the external-snapshotter client module; under -short (make check) none, as testenv.Main:
// the tests that need it skip through testenv.Require.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	env = e
	code := 1
	if err := installSnapshotCRDs(env.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop:", err)
	}
	os.Exit(code)
}

func installSnapshotCRDs(cfg *rest.Config) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-csi/external-snapshotter/client/v8").Output()
	if err != nil {
		return fmt.Errorf("find the external-snapshotter client module: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
	var paths []string
	for _, kind := range []string{"volumesnapshotclasses", "volumesnapshotcontents", "volumesnapshots"} {
		paths = append(paths, filepath.Join(dir, "snapshot.storage.k8s.io_"+kind+".yaml"))
	}
	for _, kind := range []string{"volumegroupsnapshotclasses", "volumegroupsnapshotcontents", "volumegroupsnapshots"} {
		paths = append(paths, filepath.Join(dir, "groupsnapshot.storage.k8s.io_"+kind+".yaml"))
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("install VolumeSnapshot and VolumeGroupSnapshot CRDs: %w", err)
	}
	return nil
}
