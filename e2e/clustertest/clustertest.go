// Package clustertest is the tests' side of localcluster: it finds (and builds once) the control plane's
// programs and starts a cluster for one test.
package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/localcluster"
	"github.com/lvms-dev/lvms/testtier"
)

// tailLines is how much of each component log a failed test shows.
const tailLines = 40

// StartT starts a cluster for a test in t.TempDir() (unless opts.Dir is set) and stops it when the test
// ends. A test that failed shows the end of every component log first. Without the binaries (they cannot
// be built here) the test is skipped, or fails under CI=true. Under -short (make check) the test is skipped
// before anything is built or started.
func StartT(t testing.TB, opts localcluster.Options) *localcluster.Cluster {
	t.Helper()
	testtier.Needs(t, "a control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)")
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Binaries == (localcluster.Binaries{}) {
		b, err := FindBinaries()
		if err != nil {
			testtier.Unavailablef(t, "the control plane binaries are missing and could not be built: %v", err)
		}
		opts.Binaries = b
	}
	if opts.Log == nil {
		opts.Log = testLog{t}
	}
	c, err := localcluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start cluster: %v\n%s", err, localcluster.LogTails(opts.Dir, tailLines))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", localcluster.LogTails(c.Dir, tailLines))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	return c
}

// testLog writes Options.Log lines to the test log.
type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// FindBinaries returns the directories of both builds, building what is missing into the cache (the first
// time this takes many minutes).
func FindBinaries() (localcluster.Binaries, error) {
	cp, err := testenv.Assets()
	if err != nil {
		return localcluster.Binaries{}, err
	}
	node, err := NodeBinaries()
	if err != nil {
		return localcluster.Binaries{}, err
	}
	return localcluster.Binaries{ControlPlane: cp, Node: node}, nil
}

// NodeBinaries returns the directory e2e/tools/build-node.sh prints, after it has built whatever is missing.
func NodeBinaries() (string, error) {
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "e2e", "tools", "build-node.sh")).Output()
	if err != nil {
		var stderr string
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			stderr = string(ee.Stderr)
		}
		return "", fmt.Errorf("build node binaries with e2e/tools/build-node.sh: %w: %s", err, stderr)
	}
	return strings.TrimSpace(string(out)), nil
}
