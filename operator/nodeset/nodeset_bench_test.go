package nodeset_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/bench"
	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/e2e/testenv"
	agentstatus "github.com/lvms-dev/lvms/nodeagent/status"
	"github.com/lvms-dev/lvms/operator/opprocess"
	"github.com/lvms-dev/lvms/operator/optest"
)

// smallSet is the smaller node set, the one whose idle minute is counted: 5 nodes under the smoke.
var smallSet = benchsmoke.Size(500, 5)

// BenchmarkNodeSet measures an LVMNodeSet over 500 and 5,000 Nodes against the test control plane, with
// `lvms operator` running as its own process (as deployed: every controller, the provisioner, the CSI
// controller) and a fake node agent in the benchmark playing every agent's reports. The Nodes are shaped
// like a kubelet's (realNode) and every agent reports 16 devices in 2 volume groups as a real one does
// (agentReport), so the objects the operator and the API server hold are as large as a cluster's. It reports the time
// from creating the set until all LVMNodes exist and the set's status is current (every node Ready at the
// set's generation), the operator's RSS (all of it, and its anonymous part) at that point, its API writes
// until then, counted by the API server (minus the fake agent's and the benchmark's own), and the CPU time
// each process spent until then, and from the Go runtime's own accounting (its metrics endpoint) the
// operator's largest live heap on the way, against the GOMEMLIMIT it runs with (the Deployment's, read from
// deploy/: operator/opprocess), and the part of its CPU its garbage collector took. At 500 nodes it then counts the operator's writes during an idle minute
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
	for i, nodes := range benchsmoke.Sizes(smallSet, 5000) {
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
		optest.PruneOwnedOnCleanup(b, env.Client, ns)
		pprofAddr := testenv.FreeLocalAddr(b)
		// As deployed (the manifest's GOMEMLIMIT and GOGC, its metrics endpoint served), reported to make bench.
		operator := opprocess.Start(b, bin, opprocess.Options{Kubeconfig: env.Kubeconfig(b), Namespace: ns, Pprof: pprofAddr, Metrics: env})
		operatorPID := operator.PID
		var agentWrites testenv.Writes
		// No clean-up of the set: deleting thousands of LVMNodes outlasts the benchmark's interest, and the
		// test control plane goes with the process.
		optest.StartFakeAgent(b, agentWrites.Config(env.Config), ns, agentReport)
		set := &lvmv2.LVMNodeSet{
			ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns},
			Spec: lvmv2.LVMNodeSetSpec{
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: label, Operator: corev1.NodeSelectorOpExists}}}}},
				Template:     benchTemplate(ns),
			},
		}
		// The operator runs long before a set comes; let its start-up end (its first page-out of the binary).
		time.Sleep(benchsmoke.Idle(35 * time.Second))
		serverBefore := serverWrites(b)
		cpuBefore := readCPU(b, operatorPID)
		runtimeBefore := readRuntime(b, operator)
		maxLive := runtimeBefore.LiveHeap
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
		for poll := 1; ; poll++ {
			if poll%25 == 0 { // every 5 s: the largest live heap on the way (a scrape every 30 s is Prometheus's default)
				maxLive = max(maxLive, readRuntime(b, operator).LiveHeap)
			}
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
		rt := readRuntime(b, operator)
		maxLive = max(maxLive, rt.LiveHeap)
		last = convergence{elapsed: elapsed, cpu: cpu}
		b.Logf("%d nodes Ready: %s", nodes, strings.Join(progress, ", "))
		checkReported(b, ns, nodeName(label, 0))
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
		// Its heap against the Deployment's GOMEMLIMIT, and what collecting it cost (the runtime's own
		// accounting: the GC's part of the CPU the operator used while the set converged).
		b.ReportMetric(opprocess.MiB(rt.MemoryLimit), "GOMEMLIMIT-MiB")
		b.ReportMetric(opprocess.MiB(maxLive), "max-live-heap-MiB")
		b.ReportMetric(opprocess.MiB(rt.LiveHeap), "live-heap-MiB")
		b.ReportMetric(100*rt.GCShare(runtimeBefore), "GC-CPU-%")
		limited := 0.0
		if rt.LimiterEngaged(runtimeBefore) {
			limited = 1
		}
		b.ReportMetric(limited, "GC-limited")
		b.Logf("operator at Ready: live heap %.1f MiB (largest %.1f), heap goal %.1f MiB, GOMEMLIMIT %.0f MiB, Go memory %.1f MiB, %.0f GC cycles while converging, GC %.1f%% of its CPU, CPU limiter engaged: %v",
			opprocess.MiB(rt.LiveHeap), opprocess.MiB(maxLive), opprocess.MiB(rt.HeapGoal), opprocess.MiB(rt.MemoryLimit), opprocess.MiB(rt.Mapped),
			rt.GCCycles-runtimeBefore.GCCycles, 100*rt.GCShare(runtimeBefore), rt.LimiterEngaged(runtimeBefore))
		if nodes == smallSet {
			// Let the last writes of convergence land, then count a quiet minute.
			time.Sleep(benchsmoke.Idle(5 * time.Second))
			server, agent := serverWrites(b), agentWrites.Snapshot()
			time.Sleep(benchsmoke.Idle(time.Minute))
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

// readRuntime scrapes the operator's Go runtime metrics.
func readRuntime(b *testing.B, p *opprocess.Process) opprocess.Runtime {
	b.Helper()
	var rt opprocess.Runtime
	var err error
	for range 60 { // the endpoint starts with the manager: the first scrape may come before it
		if rt, err = p.Runtime(context.Background()); err == nil {
			return rt
		}
		time.Sleep(time.Second)
	}
	b.Fatalf("the operator's runtime metrics: %v", err)
	return rt
}

func serverWrites(b *testing.B) int {
	testenv.Require(b)
	n, err := testenv.ServerWrites(context.Background(), env.Config)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// createNodes creates n Nodes shaped like real ones (realNode) with label, a few at a time, and deletes
// them when the benchmark ends.
func createNodes(b testing.TB, label string, n int) {
	testenv.Require(b)
	ctx := context.Background()
	b.Cleanup(func() {
		_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.HasLabels{label})
	})
	now := metav1.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			return env.Client.Create(gctx, realNode(nodeName(label, i), label, i, now))
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	// The API server keeps a Node's status on creation (a kubelet registers its Node so): check it did, or
	// the benchmark would measure bare Nodes while saying otherwise.
	var got corev1.Node
	if err := env.Client.Get(ctx, client.ObjectKey{Name: nodeName(label, n-1)}, &got); err != nil {
		b.Fatal(err)
	}
	if len(got.Status.Images) != len(nodeImages) || len(got.Status.Conditions) != 4 || got.Status.Allocatable.Cpu().IsZero() || got.Status.NodeInfo.KubeletVersion == "" {
		b.Fatalf("Node %s lost its status on creation: %d images, conditions %v, allocatable %v", got.Name, len(got.Status.Images), got.Status.Conditions, got.Status.Allocatable)
	}
}

// nodeName is the name of the benchmark's Node i.
func nodeName(label string, i int) string {
	return fmt.Sprintf("bench-%s-%04d", label[len(label)-6:], i)
}

// checkReported fails the benchmark unless the LVMNode of node holds what agentReport reports (16 devices
// in 2 volume groups, 2 device classes, the agent's three conditions): the figures say the agents report so.
func checkReported(b *testing.B, ns, node string) {
	var n lvmv2.LVMNode
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: node}, &n); err != nil {
		b.Fatal(err)
	}
	devices := 0
	for _, vg := range n.Status.VolumeGroups {
		devices += len(vg.Devices.Included)
	}
	var conds []string
	for _, c := range n.Status.Conditions {
		conds = append(conds, c.Type)
	}
	for _, want := range []string{lvmv2.ConditionVolumeGroupsHealthy, lvmv2.ConditionDeviceClassesHealthy, lvmv2.ConditionLVMDConfigured} {
		if !slices.Contains(conds, want) {
			b.Fatalf("LVMNode %s: no %s condition (conditions %v)", node, want, conds)
		}
	}
	if len(n.Status.VolumeGroups) != 2 || devices != 16 || len(n.Status.DeviceClasses) != 2 {
		b.Fatalf("LVMNode %s: %d volume groups, %d devices, %d device classes reported; want 2, 16, 2", node, len(n.Status.VolumeGroups), devices, len(n.Status.DeviceClasses))
	}
	b.Logf("LVMNode %s: conditions %v", node, conds)
}

// realNode is Node i as a kubelet registers and reports it on a 16-core, 64 GiB worker: the usual labels and
// annotations, a pod CIDR, and a status with capacity, allocatable, the four conditions (heartbeats at now),
// two addresses, the kubelet's port, nodeInfo and the images it holds (nodeImages, largest first, each by
// digest and tag). Both sizes of the benchmark create their Nodes with it.
func realNode(name, label string, i int, now metav1.Time) *corev1.Node {
	id := func(kind string) string { sum := sha256.Sum256([]byte(kind + name)); return hex.EncodeToString(sum[:]) }
	uuid := func(h string) string {
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	}
	zone := []string{"a", "b", "c"}[i%3]
	cidr := fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256)
	condition := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: now, LastTransitionTime: now, Reason: reason, Message: message}
	}
	var images []corev1.ContainerImage
	for _, img := range nodeImages {
		sum := sha256.Sum256([]byte(img.name + ":" + img.tag))
		images = append(images, corev1.ContainerImage{SizeBytes: img.bytes,
			Names: []string{img.name + "@sha256:" + hex.EncodeToString(sum[:]), img.name + ":" + img.tag}})
	}
	slices.SortStableFunc(images, func(a, b corev1.ContainerImage) int { return cmp.Compare(b.SizeBytes, a.SizeBytes) })
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{label: "yes",
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "node-role.kubernetes.io/worker": "",
				"node.kubernetes.io/instance-type": "m6i.4xlarge", "topology.kubernetes.io/region": "eu-west-1",
				"topology.kubernetes.io/zone": "eu-west-1" + zone},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("65842436Ki"),
				corev1.ResourceEphemeralStorage: resource.MustParse("487110636Ki"), corev1.ResourcePods: resource.MustParse("110"),
				"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("15800m"), corev1.ResourceMemory: resource.MustParse("64691460Ki"),
				corev1.ResourceEphemeralStorage: resource.MustParse("448922120958"), corev1.ResourcePods: resource.MustParse("110"),
				"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0")},
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+4)}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: id("machine")[:32], SystemUUID: uuid(id("system")), BootID: uuid(id("boot")),
				KernelVersion: "6.12.0-55.21.1.el10_0.x86_64", OSImage: "Red Hat Enterprise Linux CoreOS 10.0", ContainerRuntimeVersion: "cri-o://1.36.2",
				KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64"},
			Images: images,
		},
	}
}

// nodeImages are the images a worker of a cluster running LVMS holds: the kubelet's and CNI's, LVMS's
// and the CSI sidecars, monitoring and logging agents, and some workloads'.
var nodeImages = []struct {
	name, tag string
	bytes     int64
}{
	{"registry.k8s.io/pause", "3.10", 320_368},
	{"registry.k8s.io/kube-proxy", "v1.36.3", 31_215_342},
	{"registry.k8s.io/coredns/coredns", "v1.12.1", 20_939_036},
	{"quay.io/cilium/cilium", "v1.18.2", 214_366_870},
	{"quay.io/cilium/operator-generic", "v1.18.2", 31_408_114},
	{"quay.io/lvms/lvms", "v2.0.0", 118_203_511},
	{"registry.k8s.io/sig-storage/csi-node-driver-registrar", "v2.14.0", 14_312_290},
	{"registry.k8s.io/sig-storage/livenessprobe", "v2.16.0", 13_654_821},
	{"registry.k8s.io/sig-storage/csi-provisioner", "v5.3.0", 30_782_201},
	{"registry.k8s.io/sig-storage/csi-resizer", "v1.14.0", 29_330_718},
	{"registry.k8s.io/sig-storage/csi-snapshotter", "v8.3.0", 28_004_612},
	{"quay.io/prometheus/node-exporter", "v1.9.1", 12_301_477},
	{"quay.io/prometheus/prometheus", "v3.5.0", 134_660_209},
	{"cr.fluentbit.io/fluent/fluent-bit", "4.0.7", 38_117_563},
	{"registry.k8s.io/ingress-nginx/controller", "v1.13.1", 105_273_394},
	{"quay.io/jetstack/cert-manager-controller", "v1.18.2", 21_830_457},
	{"docker.io/library/postgres", "17.6", 157_610_942},
	{"docker.io/library/redis", "8.2.1", 52_402_318},
	{"docker.io/library/nginx", "1.29.1", 72_225_608},
	{"docker.io/bitnami/kafka", "4.0.0", 297_513_085},
}

// benchTemplate is the set's template: 2 volume groups of 8 NVMe devices each, a thin device class on the
// first and a thick one on the second (the node agent's own benchmark has the same shape).
func benchTemplate(ns string) lvmv2.LVMNodeSpec {
	devices := func(from int) []string {
		var out []string
		for d := from; d < from+8; d++ {
			out = append(out, fmt.Sprintf("/dev/nvme%dn1", d))
		}
		return out
	}
	vg := func(name string, from int) lvmv2.VolumeGroup {
		return lvmv2.VolumeGroup{Name: name, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{
			MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: devices(from)}}}}}}
	}
	return lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{vg("vg1", 0), vg("vg2", 8)},
		DeviceClasses: []lvmv2.DeviceClass{
			{Name: "thin-" + ns, Strategy: lvmv2.StrategyThin, VolumeGroup: "vg1", Thin: &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}},
			{Name: "thick-" + ns, Strategy: lvmv2.StrategyThick, VolumeGroup: "vg2", Default: true},
		},
	}
}

// deviceBytes is the size of each device: a 1.92 TB NVMe disk.
const deviceBytes = 1_920_383_410_176

// agentReport is what a node agent reports for an LVMNode once its volume groups are built, as
// nodeagent/status writes it: each volume group Healthy with its size and free space and the devices its
// selector named (kernel name, size, the selector term, the stable links), the thin pool of a thin
// class with its usage, each device class Healthy (the StorageClass and VolumeSnapshotClass states the
// operator wrote kept), and the agent's three conditions.
func agentReport(n *lvmv2.LVMNode) *lvmv2.LVMNodeStatus {
	st := &lvmv2.LVMNodeStatus{State: lvmv2.StateReady}
	quantity := func(bytes int64) *resource.Quantity { return resource.NewQuantity(bytes, resource.BinarySI) }
	for _, vg := range n.Spec.VolumeGroups {
		out := lvmv2.VolumeGroupStatus{Name: vg.Name, State: lvmv2.StateHealthy}
		for t, term := range vg.DeviceSelector.DeviceSelectorTerms {
			for _, req := range term.MatchExpressions {
				for _, kname := range req.Values {
					h := sha256.Sum256([]byte(n.Name + kname))
					serial := strings.ToUpper(hex.EncodeToString(h[:4]))
					out.Devices.Included = append(out.Devices.Included, lvmv2.Device{KName: kname, Size: quantity(deviceBytes), SelectorTerm: int32(t + 1),
						Links: []string{"/dev/disk/by-id/nvme-SAMSUNG_MZQL21T9HCJR-00A07_S64GNE0R" + serial, "/dev/disk/by-id/nvme-eui.0025388" + hex.EncodeToString(h[4:9]),
							fmt.Sprintf("/dev/disk/by-path/pci-0000:%02x:00.0-nvme-1", h[9])}})
				}
			}
		}
		size := int64(len(out.Devices.Included)) * (deviceBytes - 4<<20) // each PV's metadata and extent rounding
		out.Size, out.Free = quantity(size), quantity(size)
		for _, dc := range n.Spec.DeviceClasses {
			if dc.VolumeGroup == vg.Name && dc.Thin != nil {
				pool := size / 100 * int64(dc.Thin.SizePercent)
				out.Free = quantity(size - pool)
				out.Volumes = append(out.Volumes, lvmv2.LogicalVolumeStatus{Name: dc.Thin.PoolName, Size: quantity(pool), DataPercent: "0.0",
					MetadataPercent: "10.5", Attributes: "twi-a-tz--", DataUsageThreshold: 90, MetadataUsageThreshold: 90})
			}
		}
		st.VolumeGroups = append(st.VolumeGroups, out)
	}
	for _, dc := range n.Spec.DeviceClasses {
		out := lvmv2.DeviceClassStatus{Name: dc.Name, VolumeGroup: dc.VolumeGroup, State: lvmv2.StateHealthy}
		for _, prev := range n.Status.DeviceClasses {
			if prev.Name == dc.Name {
				out.StorageClass, out.SnapshotClass = prev.StorageClass, prev.SnapshotClass
			}
		}
		st.DeviceClasses = append(st.DeviceClasses, out)
	}
	st.Conditions = []metav1.Condition{
		{Type: lvmv2.ConditionVolumeGroupsHealthy, Status: metav1.ConditionTrue, Reason: agentstatus.ReasonAllHealthy, Message: "every volume group is healthy", ObservedGeneration: n.Generation},
		{Type: lvmv2.ConditionDeviceClassesHealthy, Status: metav1.ConditionTrue, Reason: agentstatus.ReasonAllHealthy, Message: "every device class is healthy", ObservedGeneration: n.Generation},
		{Type: lvmv2.ConditionLVMDConfigured, Status: metav1.ConditionTrue, Reason: agentstatus.ReasonWritten, Message: "lvmd.yaml lists every device class", ObservedGeneration: n.Generation},
	}
	return st
}
