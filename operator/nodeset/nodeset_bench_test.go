package nodeset_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/bench"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

// BenchmarkNodeSet measures an LVMNodeSet over 500 and 5,000 Nodes against the test control plane, with
// `lvms operator` running as its own process (as deployed: every controller, the provisioner, the CSI
// controller) and a fake node agent in the benchmark playing every agent's reports. It reports the time
// from creating the set until all LVMNodes exist and the set's status is current (every node Ready at the
// set's generation), the operator's RSS (all of it, and its anonymous part) at that point, its API writes
// until then, counted by the API server (minus the fake agent's and the benchmark's own), and the CPU time
// each process spent until then. At 500 nodes it then counts the operator's writes during an idle minute
// (Leases apart).
//
// The machine is saturated while a set converges (the API server, etcd, the fake agents and the operator
// share its cores), so the time is the CPU work divided by the cores. "growth" reports k in value ∝ nodes^k
// from the two sizes, for the time and the CPU. make bench runs this benchmark in three processes, each with
// its own control plane, and records the median of each figure: the speed of a shared machine drifts by a
// quarter from one minute to the next, which alone moved a single run's time exponent between 0.95 and 1.03.
// By hand:
//
//	go test ./operator/nodeset -run '^$' -bench 'NodeSet/nodes=500$' -benchtime 1x
func BenchmarkNodeSet(b *testing.B) {
	bin := testenv.BuildLVMS(b)
	var pair [2]convergence
	for i, nodes := range []int{500, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { pair[i] = benchNodeSet(b, bin, nodes) })
	}
	if pair[0].elapsed == 0 || pair[1].elapsed == 0 {
		return // a size was filtered out or failed: no growth to report
	}
	b.Run("growth", func(b *testing.B) {
		b.Logf("500 nodes %s; 5000 nodes %s", pair[0], pair[1])
		b.ReportMetric(exponent(pair[0].elapsed.Seconds(), pair[1].elapsed.Seconds()), "k-time")
		b.ReportMetric(exponent(pair[0].cpu.total(), pair[1].cpu.total()), "k-cpu")
		b.ReportMetric(exponent(pair[0].cpu.operator, pair[1].cpu.operator), "k-operator-cpu")
	})
}

// convergence is what one set's convergence took.
type convergence struct {
	elapsed time.Duration
	cpu     cpuTimes
}

func (c convergence) String() string {
	return fmt.Sprintf("%.1f s (CPU s: operator %.1f, API server %.1f, etcd %.1f, fake agents %.1f)",
		c.elapsed.Seconds(), c.cpu.operator, c.cpu.apiServer, c.cpu.etcd, c.cpu.agents)
}

// cpuTimes are CPU seconds of the processes a convergence keeps busy; agents is the benchmark's own
// process (the fake agents, and the benchmark polling the set).
type cpuTimes struct{ operator, apiServer, etcd, agents float64 }

func (c cpuTimes) total() float64 { return c.operator + c.apiServer + c.etcd + c.agents }

func (c cpuTimes) sub(d cpuTimes) cpuTimes {
	return cpuTimes{c.operator - d.operator, c.apiServer - d.apiServer, c.etcd - d.etcd, c.agents - d.agents}
}

// readCPU reads the CPU seconds of the operator, the test control plane and this process.
func readCPU(b *testing.B, operatorPID int) cpuTimes {
	var c cpuTimes
	for _, p := range []struct {
		field *float64
		comm  string
	}{{&c.apiServer, "kube-apiserver"}, {&c.etcd, "etcd"}} {
		pids, err := testenv.ChildPIDs(p.comm)
		if err != nil || len(pids) != 1 {
			b.Fatalf("the test control plane's %s: pids %v, %v", p.comm, pids, err)
		}
		*p.field = cpuSeconds(b, pids[0])
	}
	c.operator, c.agents = cpuSeconds(b, operatorPID), cpuSeconds(b, os.Getpid())
	return c
}

func cpuSeconds(b *testing.B, pid int) float64 {
	s, err := testenv.CPUSeconds(pid)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// exponent is k in value ∝ nodes^k from the values at 500 and 5,000 nodes.
func exponent(at500, at5000 float64) float64 { return bench.K(at500, at5000, 500, 5000) }

// benchNodeSet measures one set over nodes new Nodes.
func benchNodeSet(b *testing.B, bin string, nodes int) convergence {
	testenv.Require(b)
	ctx := context.Background()
	label := fmt.Sprintf("bench.lvms.io/run-%d", time.Now().UnixNano())
	createNodes(b, label, nodes)
	var last convergence
	for range b.N {
		ns := env.Namespace(b)
		pprofAddr := testenv.FreeLocalAddr(b)
		operatorPID := startOperator(b, bin, ns, pprofAddr)
		var agentWrites testenv.Writes
		// No clean-up of the set: deleting thousands of LVMNodes outlasts the benchmark's interest, and the
		// test control plane goes with the process.
		optest.StartFakeAgent(b, agentWrites.Config(env.Config), ns, optest.ReportReady)
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
		// The operator runs long before a set comes; let its start-up end (its first page-out of the binary).
		time.Sleep(35 * time.Second)
		serverBefore := serverWrites(b)
		cpuBefore := readCPU(b, operatorPID)
		b.ResetTimer()
		start := time.Now()
		if err := env.Client.Create(ctx, set); err != nil {
			b.Fatal(err)
		}
		// CPU profiles of the operator (its first seconds) and of the API server (the whole convergence: at
		// about 125 LVMNodes a second, and then some).
		profiled := make(chan error, 2)
		go func() {
			profiled <- testenv.SaveCPUProfile("http://"+pprofAddr, fmt.Sprintf("operator-%d-cpu.pprof", nodes), 8)
		}()
		go func() {
			profiled <- testenv.SaveAPIServerCPUProfile(env.Config, fmt.Sprintf("apiserver-%d-cpu.pprof", nodes), nodes/125+5)
		}()
		b.Cleanup(func() {
			for range 2 {
				if err := <-profiled; err != nil {
					b.Logf("CPU profile: %v", err)
				}
			}
		})
		var lvmNodes int
		var progress []string // when each further tenth of the nodes was Ready: where the time goes
		for {
			var got lvmv2.LVMNodeSet
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
				b.Fatal(err)
			}
			for tenth := len(progress) + 1; tenth <= 10 && int(got.Status.ReadyNodes)*10 >= tenth*nodes; tenth++ {
				progress = append(progress, fmt.Sprintf("%d%% %.1fs", tenth*10, time.Since(start).Seconds()))
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
		cpu := readCPU(b, operatorPID).sub(cpuBefore)
		last = convergence{elapsed: elapsed, cpu: cpu}
		b.Logf("%d nodes Ready: %s", nodes, strings.Join(progress, ", "))
		// Where the time went: the operator's share, and the rest (the API server and etcd, the fake agents).
		b.ReportMetric(cpu.operator, "operator-cpu-s")
		b.ReportMetric(cpu.total(), "cpu-s")
		rss, err := testenv.RSSKiB(operatorPID)
		if err != nil {
			b.Fatal(err)
		}
		anon, _ := testenv.AnonKiB(operatorPID)
		if err := testenv.SaveHeapProfile("http://"+pprofAddr, fmt.Sprintf("operator-%d-heap.pprof", nodes)); err != nil {
			b.Logf("heap profile: %v", err)
		}
		// Operator writes: all the server served, less the fake agent's and the set's creation.
		writesToReady := serverWrites(b) - serverBefore - agentWrites.CountSince(nil) - 1
		b.ReportMetric(elapsed.Seconds(), "s-to-ready")
		b.ReportMetric(float64(rss)/1024, "RSS-MiB")
		b.ReportMetric(float64(anon)/1024, "anon-MiB")
		b.ReportMetric(float64(writesToReady), "writes-to-ready")
		if nodes == 500 {
			// Let the last writes of convergence land, then count a quiet minute.
			time.Sleep(5 * time.Second)
			server, agent := serverWrites(b), agentWrites.Snapshot()
			time.Sleep(time.Minute)
			if a := agentWrites.CountSince(agent); a != 0 {
				b.Logf("the fake agent wrote %d times in the idle minute:\n%s", a, agentWrites.Since(agent))
			}
			b.ReportMetric(float64(serverWrites(b)-server-agentWrites.CountSince(agent)), "writes/idle-min")
			// Steady state: what the operator holds once the burst is over and its memory trimmed.
			if rss, err := testenv.RSSKiB(operatorPID); err == nil {
				anon, _ := testenv.AnonKiB(operatorPID)
				b.ReportMetric(float64(rss)/1024, "idle-RSS-MiB")
				b.ReportMetric(float64(anon)/1024, "idle-anon-MiB")
			}
		}
	}
	return last
}

// startOperator runs `lvms operator` for namespace ns, as deployed (its GOGC), until the benchmark ends
// and returns its PID.
func startOperator(b *testing.B, bin, ns, pprofAddr string) int {
	testenv.Require(b)
	return testenv.StartProcess(b, bin, []string{"GOGC=" + names.OperatorGOGC},
		"operator", "--kubeconfig", env.Kubeconfig(b), "--namespace", ns, "--node-agent-image", "quay.io/lvms/lvms:bench",
		"--metrics-bind-address=0", "--console-bind-address=0", "--health-probe-bind-address=0", "--csi-socket=",
		"--pprof-bind-address="+pprofAddr)
}

func serverWrites(b *testing.B) int {
	testenv.Require(b)
	n, err := testenv.ServerWrites(context.Background(), env.Config)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// createNodes creates n Nodes with label, a few at a time, and deletes them when the benchmark ends.
func createNodes(b *testing.B, label string, n int) {
	testenv.Require(b)
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
