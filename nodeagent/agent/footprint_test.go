package agent

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// BenchmarkIdleResync measures one agent in steady state on 16 loop devices in 2 volume groups (one with a
// thin device class): process spawns per idle resync, and the process's resident memory afterwards. It
// runs as root on real LVM, against the envtest control plane, with the agent's manager and cache:
//
//	go test ./nodeagent/agent -run '^$' -bench BenchmarkIdleResync -benchtime 20x
func BenchmarkIdleResync(b *testing.B) {
	loopdev.RequireRoot(b)
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := loopdev.Dir(b)
	var disks []string
	for range 16 {
		disks = append(disks, loopdev.Attach(b, dir, 256<<20, false))
	}
	prefix := loopdev.Prefix(b)
	count := &lvm.CountingExecutor{}
	runner := loopdev.Runner(b, prefix, "bench", count)

	ns := env.Namespace(b)
	nodeName := "bench-" + ns
	if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(mgr.GetClient(), Options{NodeName: nodeName, Namespace: ns, Runner: runner,
		LVMDConfigPath: filepath.Join(b.TempDir(), "lvmd.yaml")})
	if err != nil {
		b.Fatal(err)
	}
	// The benchmark drives the reconciles itself (one per iteration) through the manager's cached client,
	// so the controller is not registered; its informers start on first use, as in the agent.
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	b.Cleanup(func() { cancel(); <-done })

	vgA, vgB := prefix+"-a", prefix+"-b"
	ln := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nodeName}, Spec: lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{
			{Name: vgA, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{term(expr(lvmv2.KeyKName, lvmv2.OpIn, disks[:8]...))}}},
			{Name: vgB, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{term(expr(lvmv2.KeyKName, lvmv2.OpIn, disks[8:]...))}}},
		},
		DeviceClasses: []lvmv2.DeviceClass{
			{Name: "thin", Strategy: lvmv2.StrategyThin, VolumeGroup: vgA, Thin: &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}},
			{Name: "thick", Strategy: lvmv2.StrategyThick, VolumeGroup: vgB, Default: true},
		},
	}}
	if err := env.Client.Create(ctx, ln); err != nil {
		b.Fatal(err)
	}
	req := reqFor(a)
	// Converge, then let the cache catch up with the agent's own writes (a conflict means a stale cache).
	for i := 0; i < 10; i++ {
		if _, err := a.Reconcile(ctx, req); err != nil {
			if i == 9 {
				b.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	rep, err := runner.FullReport(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if len(rep.PVsOf(vgA)) != 8 || len(rep.PVsOf(vgB)) != 8 {
		var ln lvmv2.LVMNode
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: nodeName}, &ln)
		b.Fatalf("volume groups not built: %d and %d PVs; status %s", len(rep.PVsOf(vgA)), len(rep.PVsOf(vgB)), mustJSON(ln.Status))
	}
	var got lvmv2.LVMNode
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: nodeName}, &got); err != nil || len(got.Status.VolumeGroups) != 2 {
		b.Fatalf("status not published: %v %+v", err, got.Status)
	}

	start := count.Count()
	b.ResetTimer()
	for range b.N {
		if _, err := a.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(count.Count()-start)/float64(b.N), "spawns/op")
	b.ReportMetric(vmRSSMiB(b), "RSS-MiB")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
}

// vmRSSMiB reads this process's resident set size.
func vmRSSMiB(b *testing.B) float64 {
	kib, err := testenv.RSSKiB(0)
	if err != nil {
		b.Fatal(err)
	}
	return float64(kib) / 1024
}
