package provisioner_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// failRecorder is a testing.TB that records a failure instead of ending the test.
type failRecorder struct {
	testing.TB
	failed string
}

func (r *failRecorder) Helper() {}
func (r *failRecorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

// TestScaleWait_RefusedWorkloadFailsAtOnceNamingWhy: the scale benchmarks' wait, given claims the node
// refuses (its thin pool at its 90% data usage threshold, as 90 volumes put a simulated pool: what stalled
// BenchmarkProvisioned5000 for its 30-minute timeout), ends the benchmark with the node agent's reason,
// not at its timeout; once the refusal is known, at the first poll.
func TestScaleWait_RefusedWorkloadFailsAtOnceNamingWhy(t *testing.T) {
	testenv.Require(t)
	names := driver.New(false)
	ns := env.Namespace(t)
	nodes := nodeNames("refused-"+ns, 1)
	d := csidriver.Start(t, env.Config, csidriver.Options{Names: names, Nodes: nodes,
		Setup: func(mgr manager.Manager, d *csidriver.Driver) error {
			return provisioner.New(provisioner.Options{Names: names, CSI: d.Controller}).SetupWithManager(mgr)
		}})
	d.Node(nodes[0]).LVM.SetPoolUsage("thin", "pool", "90.00", "1.50")
	sc := newScaleClass(t, env.Client, names, "thin")
	refusals := testenv.WatchRefusals(t, env.Config, ns)
	createClaims(t, env.Client, ns, sc, 3, nodes, 3)

	polls := 0
	done := func() (bool, string) {
		polls++
		n := countBoundPVs(t, env.Client, sc)
		return n == 3, fmt.Sprintf("%d of 3 PVs", n)
	}
	r := &failRecorder{TB: t}
	waitFor(r, 30*time.Minute, done, refusals.First)
	t.Logf("the wait failed with: %s", r.failed)
	for _, want := range []string{"can never complete", "claim " + ns + "/c-0000", "Not enough space",
		`thin pool thin/pool of device class "thin" is past its data usage threshold (90.0% used, threshold 90%)`, "0 of 3 PVs"} {
		if !strings.Contains(r.failed, want) {
			t.Errorf("the wait's failure %q does not say %q", r.failed, want)
		}
	}

	polls = 0
	r = &failRecorder{TB: t}
	waitFor(r, 30*time.Minute, done, refusals.First)
	if polls != 1 || !strings.Contains(r.failed, "past its data usage threshold") {
		t.Errorf("with the refusal known, the wait polled %d times and failed with %q; want 1 poll and the refusal", polls, r.failed)
	}
}
