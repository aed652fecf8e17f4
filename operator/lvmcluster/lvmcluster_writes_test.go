package lvmcluster_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/lvmcluster"
	"github.com/lvms-dev/lvms/operator/optest"
)

// TestStaleCache_StatusNotWrittenAgain: reconciles settle (a status the API server stores as computed, no
// CRD default left out); a reconcile that starts from a cache which has not yet received the reconciler's
// own last status write writes nothing (an idle operator's stray write, caught by CI on the LVMNodeSet's
// twin of this test), neither the status nor the up-to-date LVMVolumeGroup; a real change is still written.
func TestStaleCache_StatusNotWrittenAgain(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	f := &fixture{t: t, ns: ns, c: env.Client, label: "test.lvms.io/" + ns}
	optest.CleanUpNamespace(t, env.Client, ns)
	f.node("a", "storage")
	f.create(f.cluster("lvms", "storage", "vg1"))
	var writes testenv.Writes
	counted, err := client.New(writes.Config(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	view := &optest.LaggingCache{Client: counted}
	r := &lvmcluster.Reconciler{Client: view, Namespace: ns}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "lvms"}}
	optest.ReleaseOnCleanup(t, env.Client, &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: req.Name}})
	all := writes.Snapshot()
	statusWrites := func(before map[string]int) int { return writes.CountSince(before, "/lvmclusters/*/status") }

	view.Stale = optest.ReadByLastStatusWrite(t, func() error { _, err := r.Reconcile(t.Context(), req); return err },
		func() *lvmv1.LVMCluster { return f.get("lvms") }, func() int { return statusWrites(all) })
	onServer := f.get("lvms")
	before := writes.Snapshot()
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n := writes.CountSince(before); n != 0 {
		t.Errorf("a reconcile reading the cluster from before its own last status write wrote %d time(s); want nothing written (the status is on the server, the LVMVolumeGroup up to date):\n%s", n, writes.Since(before))
	}
	if now := f.get("lvms"); now.ResourceVersion != onServer.ResourceVersion {
		t.Errorf("the cluster changed on the server (resourceVersion %s → %s); want it untouched", onServer.ResourceVersion, now.ResourceVersion)
	}

	f.node("b", "storage") // a real change, written over the lagging cache
	before = writes.Snapshot()
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n := statusWrites(before); n != 1 {
		t.Errorf("a new node with a lagging cache: %d status writes; want 1", n)
	}
	if got := f.get("lvms").Status.DeviceClassStatuses; len(got) != 1 || len(got[0].NodeStatus) != 2 {
		t.Errorf("deviceClassStatuses after node b joined: %+v; want vg1 on two nodes", got)
	}
}
