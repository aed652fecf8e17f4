package agent

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// idleAgent is an agent in steady state on real LVM: its volume groups built and its status published,
// with its process spawns and API writes counted from here on.
type idleAgent struct {
	a       *Agent
	devices []string // the loop devices of its volume groups
	req     reconcile.Request
	spawns  *lvm.CountingExecutor
	writes  *testenv.Writes
}

// startIdleAgent runs one agent on disks loop devices in 2 volume groups (one with a thin device class)
// against the envtest control plane, with the agent's manager and cache, and converges it. The caller
// drives the reconciles (the controller is not registered; its informers start on first use, as in the
// agent).
func startIdleAgent(tb testing.TB, disks int) *idleAgent {
	testenv.Require(tb)
	loopdev.RequireRoot(tb)
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	dir := loopdev.Dir(tb)
	var devices []string
	for range disks {
		devices = append(devices, loopdev.Attach(tb, dir, 256<<20, false))
	}
	prefix := loopdev.Prefix(tb)
	ia := &idleAgent{devices: devices, spawns: &lvm.CountingExecutor{}, writes: &testenv.Writes{}}
	runner := loopdev.Runner(tb, prefix, "idle", ia.spawns)

	ns := env.Namespace(tb)
	nodeName := "idle-" + ns
	if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	})
	mgr, err := ctrl.NewManager(ia.writes.Config(env.Config), ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		tb.Fatal(err)
	}
	ia.a, err = New(mgr.GetClient(), Options{NodeName: nodeName, Namespace: ns, Runner: runner, Reader: mgr.GetAPIReader(),
		LVMDConfigPath: filepath.Join(tb.TempDir(), "lvmd.yaml")})
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })

	vgA, vgB := prefix+"-a", prefix+"-b"
	half := disks / 2
	ln := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nodeName}, Spec: lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{
			{Name: vgA, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{term(expr(lvmv2.KeyKName, lvmv2.OpIn, devices[:half]...))}}},
			{Name: vgB, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{term(expr(lvmv2.KeyKName, lvmv2.OpIn, devices[half:]...))}}},
		},
		DeviceClasses: []lvmv2.DeviceClass{
			{Name: "thin", Strategy: lvmv2.StrategyThin, VolumeGroup: vgA, Thin: &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}},
			{Name: "thick", Strategy: lvmv2.StrategyThick, VolumeGroup: vgB, Default: true},
		},
	}}
	if err := env.Client.Create(ctx, ln); err != nil {
		tb.Fatal(err)
	}
	ia.req = reqFor(ia.a)
	// Converge, then let the cache catch up with the agent's own writes (a conflict means a stale cache).
	for i := 0; i < 10; i++ {
		if _, err := ia.a.Reconcile(ctx, ia.req); err != nil {
			if i == 9 {
				tb.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	rep, err := runner.FullReport(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if len(rep.PVsOf(vgA)) != half || len(rep.PVsOf(vgB)) != disks-half {
		var ln lvmv2.LVMNode
		_ = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: nodeName}, &ln)
		tb.Fatalf("volume groups not built: %d and %d PVs; status %s", len(rep.PVsOf(vgA)), len(rep.PVsOf(vgB)), mustJSON(ln.Status))
	}
	var got lvmv2.LVMNode
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: nodeName}, &got); err != nil || len(got.Status.VolumeGroups) != 2 {
		tb.Fatalf("status not published: %v %+v", err, got.Status)
	}
	return ia
}

// resyncs runs n idle reconciles and returns the programs they started, the number of API writes they
// made (Leases apart) and a description of those writes.
func (ia *idleAgent) resyncs(tb testing.TB, n int) (programs map[string]int, writes int, described string) {
	before, writesBefore := ia.spawns.Programs(), ia.writes.Snapshot()
	for range n {
		if _, err := ia.a.Reconcile(context.Background(), ia.req); err != nil {
			tb.Fatal(err)
		}
	}
	programs = ia.spawns.Programs()
	for k := range programs {
		if programs[k] -= before[k]; programs[k] == 0 {
			delete(programs, k)
		}
	}
	return programs, ia.writes.CountSince(writesBefore), ia.writes.Since(writesBefore)
}

// TestIdleResyncWork is the agent's regression guard, counting instead of timing: an idle resync on a
// converged node starts one lvm fullreport and nothing else (devices are read from /sys), probes none of its physical volumes with wipefs
// (nothing wrote to them; other devices of the host may be probed, at most once per resync), and writes
// nothing to the API server. A change that adds a command or a status write to the idle path fails here;
// one that removes work updates the list.
func TestIdleResyncWork(t *testing.T) {
	ia := startIdleAgent(t, 4)
	const n = 3
	ia.spawns.Reset()
	programs, writes, described := ia.resyncs(t, n)
	want := map[string]int{"lvm fullreport": n}
	if w := programs["wipefs"]; w > 0 && w <= n {
		want["wipefs"] = w // the host's other devices, if it has any not in use
	}
	if !maps.Equal(programs, want) {
		t.Errorf("%d idle resyncs started %s; want %s (one fullreport per resync, at most one wipefs)", n, describe(programs), describe(want))
	}
	for _, args := range ia.spawns.Args("wipefs") {
		for _, d := range ia.devices {
			if slices.Contains(args, d) {
				t.Errorf("an idle resync probed the physical volume %s with wipefs (%v), though nothing wrote to it", d, args)
			}
		}
	}
	if writes != 0 {
		t.Errorf("%d idle resyncs wrote to the API server (status is written only when it changes):\n%s", n, described)
	}
}

func describe(programs map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(programs)) {
		parts = append(parts, fmt.Sprintf("%d× %s", programs[k], k))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// BenchmarkIdleResync measures one agent in steady state on 16 loop devices in 2 volume groups (one with a
// thin device class): process spawns and API writes per idle resync, and the process's resident memory
// afterwards. It runs as root on real LVM, against the envtest control plane (under make test's smoke,
// benchsmoke, on 2 loop devices):
//
//	go test ./nodeagent/agent -run '^$' -bench BenchmarkIdleResync -benchtime 20x
func BenchmarkIdleResync(b *testing.B) {
	ia := startIdleAgent(b, benchsmoke.Size(16, 2))
	b.ResetTimer()
	programs, writes, described := ia.resyncs(b, b.N)
	b.StopTimer()
	spawns := 0
	for _, c := range programs {
		spawns += c
	}
	b.Logf("%d idle resyncs started %s", b.N, describe(programs))
	if writes != 0 {
		b.Logf("API writes during %d idle resyncs:\n%s", b.N, described)
	}
	b.ReportMetric(float64(spawns)/float64(b.N), "spawns/op")
	b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
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
