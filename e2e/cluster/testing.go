package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/testtier"
)

// tailLines is how much of each component log a failed test shows.
const tailLines = 40

// StartT starts a cluster for a test in t.TempDir() (unless opts.Dir is set) and stops it when the test
// ends. A test that failed shows the end of every component log first. Without the binaries (they cannot
// be built here) the test is skipped, or fails under CI=true. Under -short (make check) the test is skipped
// before anything is built or started.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	testtier.Needs(t, "a control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)")
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Binaries == (Binaries{}) {
		b, err := FindBinaries()
		if err != nil {
			testtier.Unavailablef(t, "the control plane binaries are missing and could not be built: %v", err)
		}
		opts.Binaries = b
	}
	if opts.Log == nil {
		opts.Log = testLog{t}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start cluster: %v\n%s", err, LogTails(opts.Dir, tailLines))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", LogTails(c.Dir, tailLines))
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
