package nodeset_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/optest"
)

// BenchmarkNodeSet500Nodes measures an LVMNodeSet over 500 Nodes against the test control plane: the time
// from creating the set until all 500 LVMNodes exist and the set's aggregated status is current (500
// Ready nodes at the set's generation), and the process's Go heap and RSS at that point. The process runs
// the operator and a fake node agent (playing the 500 agents' reports); the API server and etcd are
// separate processes. Run with: go test ./operator/nodeset -run '^$' -bench NodeSet500 -benchtime 1x
func BenchmarkNodeSet500Nodes(b *testing.B) {
	const nodes = 500
	ctx := context.Background()
	label := fmt.Sprintf("bench.lvms.io/run-%d", time.Now().UnixNano())
	for i := range nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%s-%03d", label[len(label)-6:], i), Labels: map[string]string{label: "yes"}}}
		if err := env.Client.Create(ctx, n); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = env.Client.Delete(ctx, n) })
	}
	for range b.N {
		ns := env.Namespace(b)
		optest.Start(b, env.Config, operator.Options{Namespace: ns})
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
			if got.Status.ObservedGeneration == got.Generation && got.Status.ReadyNodes == nodes && got.Status.State == lvmv2.StateReady {
				var list lvmv2.LVMNodeList
				if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
					b.Fatal(err)
				}
				if lvmNodes = len(list.Items); lvmNodes == nodes {
					break
				}
			}
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("not converged after 10 minutes: %d LVMNodes, status %s %d/%d", lvmNodes, got.Status.State, got.Status.ReadyNodes, got.Status.DesiredNodes)
			}
			time.Sleep(200 * time.Millisecond)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(elapsed.Seconds(), "s-to-converge")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(rssMiB(), "rss-MiB")
	}
}

// rssMiB is the resident set size of this process, or 0 when unknown.
func rssMiB() float64 {
	kib, _ := testenv.RSSKiB(0)
	return float64(kib) / 1024
}
