package nodeset_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/optest"
)

// BenchmarkNodeSet measures an LVMNodeSet over 500 and 5,000 Nodes against the test control plane: the
// time from creating the set until all LVMNodes exist and the set's aggregated status is current (every
// node Ready at the set's generation), and the process's Go heap and RSS at that point. The process runs
// the operator and a fake node agent (playing every agent's reports); the API server and etcd are separate
// processes. At 500 nodes it then counts the operator's API writes during an idle minute (Leases apart).
// make bench records both sizes; by hand:
//
//	go test ./operator/nodeset -run '^$' -bench 'NodeSet/nodes=500$' -benchtime 1x
func BenchmarkNodeSet(b *testing.B) {
	for _, nodes := range []int{500, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { benchNodeSet(b, nodes, nodes == 500) })
	}
}

func benchNodeSet(b *testing.B, nodes int, idleMinute bool) {
	ctx := context.Background()
	label := fmt.Sprintf("bench.lvms.io/run-%d", time.Now().UnixNano())
	createNodes(b, label, nodes)
	for range b.N {
		ns := env.Namespace(b)
		var writes testenv.Writes
		optest.Start(b, writes.Config(env.Config), operator.Options{Namespace: ns})
		optest.StartFakeAgent(b, env.Config, ns, optest.ReportReady)
		optest.CleanUpNamespace(b, env.Client, ns)
		set := &lvmv2.LVMNodeSet{
			ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns},
			Spec: lvmv2.LVMNodeSetSpec{
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: label, Operator: corev1.NodeSelectorOpExists}}}}},
				Template: lvmv2.LVMNodeSpec{
					VolumeGroups: []lvmv2.VolumeGroup{{Name: "vg1", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{
						MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{"/dev/disk/by-id/data-1"}}}}}}}},
					DeviceClasses: []lvmv2.DeviceClass{{Name: "bench-" + ns, Strategy: lvmv2.StrategyThick, VolumeGroup: "vg1"}},
				},
			},
		}
		b.ResetTimer()
		start := time.Now()
		if err := env.Client.Create(ctx, set); err != nil {
			b.Fatal(err)
		}
		var lvmNodes int
		for {
			var got lvmv2.LVMNodeSet
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
				b.Fatal(err)
			}
			if got.Status.ObservedGeneration == got.Generation && got.Status.ReadyNodes == int32(nodes) && got.Status.State == lvmv2.StateReady {
				var list metav1.PartialObjectMetadataList
				list.SetGroupVersionKind(lvmv2.GroupVersion.WithKind("LVMNodeList"))
				if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
					b.Fatal(err)
				}
				if lvmNodes = len(list.Items); lvmNodes == nodes {
					break
				}
			}
			if time.Since(start) > 20*time.Minute {
				b.Fatalf("not converged after 20 minutes: %d LVMNodes, status %s %d/%d", lvmNodes, got.Status.State, got.Status.ReadyNodes, got.Status.DesiredNodes)
			}
			time.Sleep(200 * time.Millisecond)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(elapsed.Seconds(), "s-to-ready")
		b.ReportMetric(float64(writes.CountSince(nil)), "writes-to-ready")
		b.Logf("operator writes until Ready:\n%s", writes.Since(nil))
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(rssMiB(), "RSS-MiB")
		if err := testenv.WriteHeapProfile(fmt.Sprintf("operator-%d-heap.pprof", nodes)); err != nil {
			b.Logf("heap profile: %v", err)
		}
		if idleMinute {
			// Let the last status writes of convergence land, then count a quiet minute.
			time.Sleep(5 * time.Second)
			before := writes.Snapshot()
			time.Sleep(time.Minute)
			if during := writes.Since(before); during != "" {
				b.Logf("operator writes during an idle minute:\n%s", during)
			}
			b.ReportMetric(float64(writes.CountSince(before)), "writes/idle-min")
		}
	}
}

// createNodes creates n Nodes with label, a few at a time, and deletes them when the benchmark ends.
func createNodes(b *testing.B, label string, n int) {
	ctx := context.Background()
	b.Cleanup(func() {
		_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.HasLabels{label})
	})
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			return env.Client.Create(gctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("bench-%s-%04d", label[len(label)-6:], i), Labels: map[string]string{label: "yes"}}})
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// rssMiB is the resident set size of this process, or 0 when unknown.
func rssMiB() float64 {
	kib, _ := testenv.RSSKiB(0)
	return float64(kib) / 1024
}
