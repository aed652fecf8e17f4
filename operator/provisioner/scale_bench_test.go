package provisioner_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/opprocess"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// The scale benchmarks run the in-process provisioner and CSI controller with the node agents of
// csidriver (each node's LogicalVolume reconciler on lvmsim) in this process, against the envtest API
// server; make bench records them (bench/figures.go). Under make test's smoke (benchsmoke) each runs once
// on a few nodes and claims. Their waits end at once, with the reason, when a claim is refused
// (testenv.WaitFor, testenv.WatchRefusals): nothing in a benchmark would ever make room for it.

// BenchmarkCapacityNodeAdded publishes CSIStorageCapacity for 2,000 nodes (two StorageClasses, so 4,000
// objects), then adds a node with its capacity annotations and reports the time until both of its objects
// exist.
func BenchmarkCapacityNodeAdded(b *testing.B) {
	testenv.Require(b)
	nodes := benchsmoke.Size(2000, 5)
	names := driver.New(false)
	ns := env.Namespace(b)
	csidriver.Start(b, env.Config, csidriver.Options{Names: names,
		Setup: func(mgr manager.Manager, d *csidriver.Driver) error {
			return provisioner.New(provisioner.Options{Names: names, CSI: d.Controller, CapacityNamespace: ns}).SetupWithManager(mgr)
		}})
	classes := []string{newScaleClass(b, env.Client, names, "thick"), newScaleClass(b, env.Client, names, "thin")}
	label := "bench.lvms.io/capacity-" + ns
	node := func(i int) *corev1.Node {
		name := fmt.Sprintf("%s-%04d", ns, i)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{label: "yes", names.TopologyKey(): name},
			Annotations: map[string]string{names.CapacityAnnotation("thick"): strconv.FormatInt(20<<30, 10),
				names.CapacityAnnotation("thin"): strconv.FormatInt(50<<30, 10)}}}
	}
	ctx := context.Background()
	b.Cleanup(func() { _ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.HasLabels{label}) })
	createAll(b, nodes, func(ctx context.Context, i int) error { return env.Client.Create(ctx, node(i)) })
	waitFor(b, 10*time.Minute, func() (bool, string) {
		n := countCapacities(b, ns)
		return n == nodes*len(classes), fmt.Sprintf("%d of %d CSIStorageCapacity objects", n, nodes*len(classes))
	})
	for i := range b.N {
		added := node(nodes + i)
		b.ResetTimer()
		start := time.Now()
		if err := env.Client.Create(ctx, added); err != nil {
			b.Fatal(err)
		}
		want := (nodes + i + 1) * len(classes)
		waitFor(b, 5*time.Minute, func() (bool, string) {
			n := countCapacities(b, ns)
			return n == want, fmt.Sprintf("%d of %d CSIStorageCapacity objects", n, want)
		})
		b.ReportMetric(time.Since(start).Seconds(), "s-to-capacity")
		b.StopTimer()
	}
}

// BenchmarkProvisioned5000 provisions 5,000 volumes of 8 MiB on 10 nodes with `lvms operator` as its own
// process (its provisioner and CSI controller, as deployed, with its GOMEMLIMIT and GOGC) and the node agents of csidriver
// in the benchmark (claims created 50 at a time, each with its selected node). Once every PV exists and a
// minute passed idle, it reports the operator's RSS (all of it and its anonymous part): its caches hold the
// 5,000 claims, PVs and LogicalVolumes.
//
// The volumes are thick: 500 of them take 4,000 MiB of a node's 20 GiB volume group. In thin pools they
// would be refused: a simulated pool reports 1% of data used per thin volume (lvmsim), so past 89 volumes
// it is at its 90% data usage threshold and every further claim fails (what stalled this benchmark).
//
// It has a control plane of its own: the operator caches every claim, PV and LogicalVolume of the cluster,
// and refuses to start on one with LogicalVolumes in both groups (topolvm.io and topolvm.cybozu.com),
// which the package's tests leave behind when make test's smoke runs it after them.
func BenchmarkProvisioned5000(b *testing.B) {
	testenv.Require(b)
	volumes, nodeCount := benchsmoke.Size(5000, 20), benchsmoke.Size(10, 2)
	own := ownControlPlane(b)
	names := driver.New(false)
	ns := own.Namespace(b)
	nodes := nodeNames("p5k", nodeCount)
	csidriver.Start(b, own.Config, csidriver.Options{Names: names, Nodes: nodes})
	bin := testenv.BuildLVMS(b)
	pprofAddr := testenv.FreeLocalAddr(b)
	pid := opprocess.Start(b, bin, opprocess.Options{Kubeconfig: own.Kubeconfig(b), Namespace: ns, Pprof: pprofAddr}).PID // as deployed: the manifest's GOMEMLIMIT and GOGC
	sc := newScaleClass(b, own.Client, names, "thick")
	refusals := testenv.WatchRefusals(b, own.Config, ns)
	for range b.N {
		createClaims(b, own.Client, ns, sc, volumes, nodes, 50)
		waitFor(b, 30*time.Minute, func() (bool, string) {
			n := countBoundPVs(b, own.Client, sc)
			return n == volumes, fmt.Sprintf("%d of %d PVs", n, volumes)
		}, refusals.First, func() string { return testenv.ProcessEnded(pid) })
		time.Sleep(benchsmoke.Idle(time.Minute))
		rss, err := testenv.RSSKiB(pid)
		if err != nil {
			b.Fatal(err)
		}
		anon, _ := testenv.AnonKiB(pid)
		if err := testenv.SaveHeapProfile("http://"+pprofAddr, "operator-pv5000-heap.pprof"); err != nil {
			b.Logf("heap profile: %v", err)
		}
		b.ReportMetric(float64(rss)/1024, "RSS-MiB")
		b.ReportMetric(float64(anon)/1024, "anon-MiB")
	}
}

// BenchmarkClaimsAtOnce creates 1,000 claims across 100 nodes at once (as fast as the client goes) and
// reports the time until every claim has its PV (bound to the claim by claimRef; the PV controller that
// then marks both Bound is kube-controller-manager's, not run here), and the provisioning attempts that
// failed, from the claims' ProvisioningFailed events: with CSI calls bounded at 10 s, a call past its
// deadline is one.
func BenchmarkClaimsAtOnce(b *testing.B) {
	testenv.Require(b)
	claims, nodeCount := benchsmoke.Size(1000, 20), benchsmoke.Size(100, 4)
	names := driver.New(false)
	ns := env.Namespace(b)
	nodes := nodeNames("c1k", nodeCount)
	csidriver.Start(b, env.Config, csidriver.Options{Names: names, Nodes: nodes,
		Setup: func(mgr manager.Manager, d *csidriver.Driver) error {
			return provisioner.New(provisioner.Options{Names: names, CSI: d.Controller, CallTimeout: 10 * time.Second}).SetupWithManager(mgr)
		}})
	sc := newScaleClass(b, env.Client, names, "thick")
	refusals := testenv.WatchRefusals(b, env.Config, ns)
	for range b.N {
		b.ResetTimer()
		start := time.Now()
		createClaims(b, env.Client, ns, sc, claims, nodes, 64)
		waitFor(b, 20*time.Minute, func() (bool, string) {
			n := countBoundPVs(b, env.Client, sc)
			return n == claims, fmt.Sprintf("%d of %d PVs", n, claims)
		}, refusals.First)
		b.ReportMetric(time.Since(start).Seconds(), "s-all-bound")
		b.StopTimer()
		var events corev1.EventList
		if err := env.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		failed := 0
		for _, e := range events.Items {
			if e.Reason == "ProvisioningFailed" {
				failed += max(int(e.Count), 1)
				b.Logf("%s: %s", e.InvolvedObject.Name, e.Message)
			}
		}
		b.ReportMetric(float64(failed), "failed-attempts")
	}
}

// nodeNames are n simulated nodes' names.
func nodeNames(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%03d", prefix, i))
	}
	return out
}

// ownControlPlane starts a control plane for one benchmark alone (with the VolumeSnapshot CRDs, as TestMain's
// has them), stopped when it ends.
func ownControlPlane(b *testing.B) *testenv.Env {
	testenv.Require(b)
	own, err := testenv.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := own.Stop(); err != nil {
			b.Errorf("stop the benchmark's control plane: %v", err)
		}
	})
	if err := installSnapshotCRDs(own.Config); err != nil {
		b.Fatal(err)
	}
	return own
}

func newScaleClass(b testing.TB, c client.Client, names driver.Names, deviceClass string) string {
	testenv.Require(b)
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "scale-"}, Provisioner: names.Driver(),
		Parameters: map[string]string{names.DeviceClassParam(): deviceClass}, VolumeBindingMode: &mode}
	if err := c.Create(context.Background(), sc); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Delete(context.Background(), sc) })
	return sc.Name
}

// createClaims creates n claims of class sc, spread over nodes (the scheduler's selected-node annotation
// set, as it leaves them), at most parallel at a time.
func createClaims(b testing.TB, c client.Client, ns, sc string, n int, nodes []string, parallel int) {
	testenv.Require(b)
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(parallel)
	for i := range n {
		g.Go(func() error {
			return c.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c-%05d", i),
				Annotations: map[string]string{driver.SelectedNodeAnnotation: nodes[i%len(nodes)]}},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")}}}})
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

func createAll(b *testing.B, n int, create func(ctx context.Context, i int) error) {
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error { return create(ctx, i) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// countBoundPVs counts the PVs of class sc that name their claim.
func countBoundPVs(b testing.TB, c client.Client, sc string) int {
	testenv.Require(b)
	var pvs corev1.PersistentVolumeList
	if err := c.List(context.Background(), &pvs); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, pv := range pvs.Items {
		if pv.Spec.StorageClassName == sc && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID != "" {
			n++
		}
	}
	return n
}

func countCapacities(b *testing.B, ns string) int {
	testenv.Require(b)
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(storagev1.SchemeGroupVersion.WithKind("CSIStorageCapacityList"))
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	return len(list.Items)
}

// waitFor polls done every 50 ms (every second for longer waits, whose polls list thousands of
// objects) until it holds or timeout passes; what can never complete ends it at once, naming why: a claim
// refused (Refusals.First), the operator's process gone (testenv.ProcessEnded).
func waitFor(tb testing.TB, timeout time.Duration, done func() (bool, string), refused ...func() string) {
	tb.Helper()
	interval := 50 * time.Millisecond
	if timeout > 5*time.Minute {
		interval = time.Second
	}
	testenv.WaitFor(tb, interval, timeout, done, refused...)
}
