package nodeset_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/nodeset"
	"github.com/lvms-dev/lvms/operator/optest"
)

// TestOperatorWrites is the operator's regression guard, counting instead of timing: while a set over 30
// nodes converges, each LVMNode is applied once and the driver objects (DaemonSet, CSIDriver) at most a
// few times however many reconciles the new LVMNodes cause; once Ready, an idle operator writes nothing
// (Leases apart). A change that adds writes to either path fails here.
func TestOperatorWrites(t *testing.T) {
	testenv.Require(t)
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

// TestAppliesInBatches: a set whose nodes outnumber the applies of one pass applies them a batch per
// reconcile and asks for the next pass, writing its status in between (a large set's status does not stay
// stale until its last LVMNode is applied), and nodes whose LVMNode is not the template yet are never
// counted Ready. The reconciler runs by hand against the API server (no cache), pass by pass.
func TestAppliesInBatches(t *testing.T) {
	testenv.Require(t)
	const nodes, batch = 12, 5
	ns := env.Namespace(t)
	f := &fixture{t: t, ns: ns, c: env.Client, label: "test.lvms.io/" + ns}
	optest.CleanUpNamespace(t, env.Client, ns)
	for i := range nodes {
		f.node(fmt.Sprintf("n%02d", i), "storage")
	}
	f.create(f.set("batched", "storage", "vg1"))
	r := &nodeset.Reconciler{Client: env.Client, Namespace: ns, AppliesPerPass: batch}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "batched"}}
	ctx := t.Context()
	optest.ReleaseOnCleanup(t, env.Client, &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: req.Name}})
	if _, err := r.Reconcile(ctx, req); err != nil { // adds the finalizer
		t.Fatal(err)
	}
	lvmNodes := func() int {
		var list lvmv2.LVMNodeList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	for pass, want := range []int{5, 10, 12} {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatalf("pass %d: %v", pass+1, err)
		}
		if got := lvmNodes(); got != want {
			t.Errorf("after pass %d: %d LVMNodes, want %d (batches of %d)", pass+1, got, want, batch)
		}
		if more := want < nodes; more != (res.RequeueAfter > 0) {
			t.Errorf("after pass %d (%d of %d applied): requeue after %v", pass+1, want, nodes, res.RequeueAfter)
		}
		st := f.getSet("batched").Status
		if st.ReadyNodes != 0 || st.State == lvmv2.StateReady {
			t.Errorf("after pass %d: %d nodes Ready, set %s; want none (no agent reported)", pass+1, st.ReadyNodes, st.State)
		}
		creating := 0
		for _, n := range st.Nodes {
			if strings.Contains(n.Message, "creating the LVMNode") {
				creating++
			}
		}
		// The status a pass writes is what it observed at its start: the LVMNodes of the batches before it.
		if wantCreating := nodes - want + batch; min(wantCreating, nodes) != creating && want < nodes {
			t.Errorf("after pass %d: %d nodes listed as creating their LVMNode, want %d:\n%v", pass+1, creating, min(wantCreating, nodes), st.Nodes)
		}
	}
}

// TestStaleCache_StatusNotWrittenAgain: a reconcile that starts from an informer cache which has not yet
// received the reconciler's own last status write (the write is on the server, the cache shows the set as it
// was before it) does not write that status again. CI caught an idle operator writing once this way
// (TestOperatorWrites): two reconciles close together, the second reading the set from before the first's write.
func TestStaleCache_StatusNotWrittenAgain(t *testing.T) {
	testenv.Require(t)
	const nodes = 3
	ns := env.Namespace(t)
	f := &fixture{t: t, ns: ns, c: env.Client, label: "test.lvms.io/" + ns}
	optest.CleanUpNamespace(t, env.Client, ns)
	for i := range nodes {
		f.node(fmt.Sprintf("n%02d", i), "storage")
	}
	f.create(f.set("stale", "storage", "vg1"))
	var writes testenv.Writes
	counted, err := client.New(writes.Config(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	view := &optest.LaggingCache{Client: counted}
	r := &nodeset.Reconciler{Client: view, Namespace: ns}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "stale"}}
	optest.ReleaseOnCleanup(t, env.Client, &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: req.Name}})
	statusWrites := func(before map[string]int) int { return writes.CountSince(before, "/lvmnodesets/*/status") }

	all := writes.Snapshot()
	lastWriter := optest.ReadByLastStatusWrite(t, func() error { _, err := r.Reconcile(t.Context(), req); return err },
		func() *lvmv2.LVMNodeSet { return f.getSet("stale") }, func() int { return statusWrites(all) })
	onServer := f.getSet("stale")

	// The next pass reads the set as the last writing pass did: what a lagging cache shows.
	view.Stale = lastWriter
	before := writes.Snapshot()
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n := writes.CountSince(before); n != 0 {
		t.Errorf("a reconcile reading the set from before its own last status write wrote %d time(s); want nothing written:\n%s", n, writes.Since(before))
	}
	if now := f.getSet("stale"); now.ResourceVersion != onServer.ResourceVersion {
		t.Errorf("the set changed on the server (resourceVersion %s → %s); want it untouched", onServer.ResourceVersion, now.ResourceVersion)
	}

	// A real change is still written over a lagging cache: a new node joins the set.
	f.node("n99", "storage")
	before = writes.Snapshot()
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n := statusWrites(before); n != 1 {
		t.Errorf("a new node with a lagging cache: %d status writes; want 1", n)
	}
	if got := f.getSet("stale").Status.DesiredNodes; got != nodes+1 {
		t.Errorf("status.desiredNodes %d after a node joined; want %d", got, nodes+1)
	}
}
