package bundletest_test

import (
	"strings"
	"testing"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/web"
)

func TestDiffPages(t *testing.T) {
	healthy := bundle.NewSource(bundletest.Healthy().Bundle(t))
	s := bundletest.Healthy()
	bundletest.Find[*lvmv2.LVMNode](s, bundletest.NodeB).Status.State = lvmv2.StateDegraded
	degraded := bundle.NewSource(s.Bundle(t))
	wb := &web.Bundle{Name: "b.tar.gz"}

	problems, n, err := bundletest.DiffPages(healthy, healthy, wb)
	if err != nil || len(problems) != 0 || n < 10 {
		t.Errorf("the same source: %d pages, problems %v, err %v", n, problems, err)
	}
	problems, _, err = bundletest.DiffPages(healthy, degraded, wb)
	if err != nil || !strings.Contains(strings.Join(problems, "\n"), "/nodes/worker-b differs") {
		t.Errorf("a Degraded node in the bundle only: problems %v, err %v", problems, err)
	}
	problems, _, _ = bundletest.DiffPages(healthy, healthy, nil)
	if len(problems) == 0 || !strings.Contains(problems[0], "no read-only banner") {
		t.Errorf("pages without the banner pass: %v", problems)
	}
}
