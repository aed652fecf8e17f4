package nodeset_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/opprocess"
	"github.com/lvms-dev/lvms/operator/optest"
)

// The operator does not thrash at its memory limit: `lvms operator` as deployed (the manifest's
// environment) with GOMEMLIMIT lowered for this test's fifth of the nodes to a quarter of the manifest's
// (what an operator without nodes holds, its heap and the runtime's own memory, is the same at any size; a
// fifth, 38 MiB for 1,000 nodes, left the heap goal at the live heap and the collector ran back to back) brings an LVMNodeSet over 1,000 Nodes shaped like real ones, with agents
// reporting 16 devices each, to Ready; its heap reaches the point where the limit, not GOGC, paces the
// collector, and the runtime's own accounting says the collector took less than half of the CPU the
// operator used meanwhile and its CPU limiter (the runtime's guard against a heap that does not fit) never
// engaged.
func TestOperator_DoesNotThrashAtItsMemoryLimit(t *testing.T) {
	testenv.Require(t)
	if testing.Short() {
		t.Skip("runs the operator over 1,000 nodes")
	}
	const nodes = 1000
	env0, err := opprocess.Env(opprocess.DefaultOverlay)
	if err != nil {
		t.Fatal(err)
	}
	limitMiB, gogc := 0.0, 100.0
	for _, v := range env0 {
		if l, ok := strings.CutPrefix(v, "GOMEMLIMIT="); ok {
			mib, err := strconv.ParseFloat(strings.TrimSuffix(l, "MiB"), 64)
			if err != nil || !strings.HasSuffix(l, "MiB") {
				t.Fatalf("the manifest's GOMEMLIMIT=%s: this test reads MiB", l)
			}
			limitMiB = mib / 4
		}
		if g, ok := strings.CutPrefix(v, "GOGC="); ok {
			if gogc, err = strconv.ParseFloat(g, 64); err != nil {
				t.Fatalf("the manifest's GOGC=%s: %v", g, err)
			}
		}
	}
	if limitMiB == 0 {
		t.Fatalf("the manifest sets no GOMEMLIMIT for the operator (%q)", env0)
	}
	ctx := context.Background()
	label := fmt.Sprintf("test.lvms.io/memlimit-%d", time.Now().UnixNano())
	createNodes(t, label, nodes)
	ns := env.Namespace(t)
	optest.PruneOwnedOnCleanup(t, env.Client, ns)
	op := opprocess.Start(t, testenv.BuildLVMS(t), opprocess.Options{Kubeconfig: env.Kubeconfig(t), Namespace: ns, Metrics: env,
		Env: []string{fmt.Sprintf("GOMEMLIMIT=%dMiB", int(limitMiB))}})
	optest.StartFakeAgent(t, env.Config, ns, agentReport)
	var before opprocess.Runtime
	testenv.WaitFor(t, time.Second, time.Minute, func() (bool, string) {
		if before, err = op.Runtime(ctx); err != nil {
			return false, fmt.Sprintf("the operator's metrics: %v", err)
		}
		return true, ""
	})
	if got := opprocess.MiB(before.MemoryLimit); got != float64(int(limitMiB)) {
		t.Fatalf("the operator runs with a memory limit of %.1f MiB, want the %d MiB it was given", got, int(limitMiB))
	}
	set := &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: "memlimit", Namespace: ns},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: label, Operator: corev1.NodeSelectorOpExists}}}}},
			Template:     benchTemplate(ns),
		}}
	if err := env.Client.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	// Sample the runtime every 2 s until the set is Ready: pressed is a sample whose heap goal the limit
	// held below what GOGC alone would have allowed.
	var last opprocess.Runtime
	pressed, maxLive := false, 0.0
	testenv.WaitFor(t, 2*time.Second, 20*time.Minute, func() (bool, string) {
		rt, err := op.Runtime(ctx)
		if err != nil {
			return false, fmt.Sprintf("the operator's metrics: %v", err)
		}
		last, maxLive = rt, max(maxLive, rt.LiveHeap)
		pressed = pressed || rt.HeapGoal < 0.95*rt.LiveHeap*(1+gogc/100)
		var got lvmv2.LVMNodeSet
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.ReadyNodes == nodes && got.Status.State == lvmv2.StateReady,
			fmt.Sprintf("set %s, %d of %d nodes Ready; operator live heap %.1f MiB, heap goal %.1f MiB, limit %.0f MiB",
				got.Status.State, got.Status.ReadyNodes, nodes, opprocess.MiB(rt.LiveHeap), opprocess.MiB(rt.HeapGoal), limitMiB)
	}, func() string { return testenv.ProcessEnded(op.PID) })
	share := last.GCShare(before)
	t.Logf("%d nodes Ready with GOMEMLIMIT=%dMiB: largest live heap %.1f MiB, %.0f collections, GC %.1f%% of the operator's CPU (%.1f of %.1f s), limiter engaged: %v",
		nodes, int(limitMiB), opprocess.MiB(maxLive), last.GCCycles-before.GCCycles, 100*share, last.GCCPU-before.GCCPU, last.UsedCPU-before.UsedCPU, last.LimiterEngaged(before))
	if !pressed {
		t.Fatalf("the operator's heap (largest live %.1f MiB) never came near its %d MiB limit: this test measured the GC away from it", opprocess.MiB(maxLive), int(limitMiB))
	}
	if share >= 0.5 {
		t.Errorf("the garbage collector took %.0f%% of the operator's CPU on the way to Ready at its memory limit: it thrashes", 100*share)
	}
	if last.LimiterEngaged(before) {
		t.Errorf("the runtime's GC CPU limiter engaged (last in cycle %.0f): the heap did not fit the %d MiB limit", last.LimiterLastEnabled, int(limitMiB))
	}
}
