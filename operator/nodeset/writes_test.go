package nodeset_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/optest"
)

// TestOperatorWrites is the operator's regression guard, counting instead of timing: while a set over 30
// nodes converges, each LVMNode is applied once and the driver objects (DaemonSet, CSIDriver) at most a
// few times however many reconciles the new LVMNodes cause; once Ready, an idle operator writes nothing
// (Leases apart). A change that adds writes to either path fails here.
func TestOperatorWrites(t *testing.T) {
	const nodes = 30
	ns := env.Namespace(t)
	f := &fixture{t: t, ns: ns, c: env.Client, label: "test.lvms.io/" + ns}
	var writes testenv.Writes
	optest.Start(t, writes.Config(env.Config), operator.Options{Namespace: ns})
	optest.StartFakeAgent(t, env.Config, ns, optest.ReportReady)
	optest.CleanUpNamespace(t, env.Client, ns)
	for i := range nodes {
		f.node(fmt.Sprintf("n%02d", i), "storage")
	}
	f.create(f.set("guard", "storage", "vg1"))
	f.waitSetState("guard", lvmv2.StateReady, "")

	counts := writes.Snapshot()
	byKind := func(fragment string) int {
		n := 0
		for k, c := range counts {
			if strings.Contains(k, fragment) {
				n += c
			}
		}
		return n
	}
	if got := byKind("PATCH /apis/lvm.topolvm.io/v2alpha1/namespaces/*/lvmnodes/*") - byKind("/lvmnodes/*/status"); got != nodes {
		t.Errorf("%d LVMNode writes for %d nodes; want one apply each:\n%s", got, nodes, writes.Since(nil))
	}
	for _, kind := range []string{"/daemonsets/", "/csidrivers/"} {
		if got := byKind(kind); got == 0 || got > 3 {
			t.Errorf("%d writes of %s while %d nodes converged; want 1 to 3 (applied again only when it changed):\n%s", got, kind, nodes, writes.Since(nil))
		}
	}
	idle := writes.Snapshot()
	time.Sleep(3 * time.Second) // a window to count writes in, not a timing assertion
	if during := writes.Since(idle); during != "" {
		t.Errorf("an idle operator wrote:\n%s", during)
	}
}
