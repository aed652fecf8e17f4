package bench

// Figures are the numbers LVMS promises about its footprint and speed at scale (issue "Footprint and
// scale"), each with the benchmark that measures it and its goal. `make bench` runs every Run and fills
// this table; the README's performance table is rendered from its results. What each is measured on (its
// Setup) is stated with the Run that measures it, below.
var Figures = []Figure{
	{Name: "agent-rss", Title: "`lvms nodeagent` RSS, idle, 16 devices in 2 volume groups, CSI node + lvmd + registration + probes in one process",
		Package: "./nodeagent/agent", Benchmark: "NodeagentProcess/idle", Metric: "RSS-MiB", Unit: "MiB", Goal: Below(25)},
	{Name: "agent-rss-resync", Title: "… the same agent looking at its node every 2 s (no kernel device events)",
		Package: "./nodeagent/agent", Benchmark: "NodeagentProcess/resync=2s", Metric: "RSS-MiB", Unit: "MiB"},
	{Name: "resync-spawns", Title: "processes started by an idle resync (16 devices, 2 volume groups)",
		Package: "./nodeagent/agent", Benchmark: "IdleResync", Metric: "spawns/op", Unit: "processes", Goal: AtMost(1)},
	{Name: "agent-idle-writes", Title: "API writes by one agent's idle resync",
		Package: "./nodeagent/agent", Benchmark: "IdleResync", Metric: "writes/op", Unit: "writes", Goal: AtMost(0)},
	{Name: "operator-idle-writes", Title: "API writes by the operator per idle minute, 500 nodes Ready",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=500", Metric: "writes/idle-min", Unit: "writes", Goal: AtMost(0)},
	{Name: "nodeset-500-time", Title: "LVMNodeSet over 500 Nodes shaped like real ones, created → every LVMNode Ready (fake agents reporting 16 devices in 2 volume groups, real API server)",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=500", Metric: "s-to-ready", Unit: "s", Goal: Below(10)},
	{Name: "nodeset-500-rss", Title: "… `lvms operator` RSS a minute later, idle (steady state, memory trimmed)",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=500", Metric: "idle-RSS-MiB", Unit: "MiB", Goal: Below(40)},
	{Name: "nodeset-500-rss-ready", Title: "… `lvms operator` RSS at the moment every LVMNode is Ready (code of the burst resident)",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=500", Metric: "RSS-MiB", Unit: "MiB"},
	{Name: "nodeset-5000-time", Title: "LVMNodeSet over 5,000 Nodes shaped like real ones, created → every LVMNode Ready",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=5000", Metric: "s-to-ready", Unit: "s", Goal: Below(60)},
	{Name: "nodeset-5000-rss", Title: "… `lvms operator` RSS at that point",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=5000", Metric: "RSS-MiB", Unit: "MiB", Goal: Below(200)},
	// The heap against the Deployment's GOMEMLIMIT (192 MiB, GOGC=50): the goal is a live heap whose 1.5-fold,
	// the heap GOGC lets grow before a collection, is within the limit (the runtime's own memory comes on
	// top, so the limit starts pacing the collector a little earlier); past it the collector runs ever more
	// often. operator/opprocess's tests hold this goal to the manifest.
	{Name: "nodeset-5000-live-heap", Title: "… its largest live heap while the set converged (the Go runtime's own figure), within the Deployment's `GOMEMLIMIT=192MiB` at `GOGC=50`",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=5000", Metric: "max-live-heap-MiB", Unit: "MiB", Goal: Below(128)},
	{Name: "nodeset-5000-gc-share", Title: "… the part of the CPU the operator used until Ready that went to its garbage collector (the Go runtime's own accounting)",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=5000", Metric: "GC-CPU-%", Unit: "%", Goal: Below(50)},
	{Name: "nodeset-time-exponent", Title: "growth of the time to Ready from 500 to 5,000 nodes: k in time ∝ nodes^k (median of 3 rounds, each measuring both sizes back to back in its own control plane)",
		Package: "./operator/nodeset", Benchmark: "NodeSet/growth", Metric: "k-time", Goal: AtMost(1)},
	{Name: "nodeset-cpu-exponent", Title: "… growth of the CPU time every process spent until Ready (operator, API server, etcd, fake agents)",
		Package: "./operator/nodeset", Benchmark: "NodeSet/growth", Metric: "k-cpu", Goal: AtMost(1)},
	{Name: "nodeset-operator-cpu-exponent", Title: "… growth of the operator's own CPU time",
		Package: "./operator/nodeset", Benchmark: "NodeSet/growth", Metric: "k-operator-cpu", Goal: AtMost(1)},
	{Name: "nodeset-rss-exponent", Title: "growth of the operator's RSS from 500 to 5,000 nodes: k in RSS ∝ nodes^k",
		Goal: AtMost(1), Derived: Exponent("nodeset-500-rss-ready", "nodeset-5000-rss", 500, 5000)},
	{Name: "capacity-node-added", Title: "a node added to a 2,000-node cluster → its CSIStorageCapacity objects exist",
		Package: "./operator/provisioner", Benchmark: "CapacityNodeAdded", Metric: "s-to-capacity", Unit: "s", Goal: Below(10)},
	{Name: "provisioned-5000-rss", Title: "5,000 PersistentVolumes provisioned by `lvms operator`'s provisioner on 10 nodes, then a minute idle: its RSS",
		Package: "./operator/provisioner", Benchmark: "Provisioned5000", Metric: "RSS-MiB", Unit: "MiB", Goal: Below(100)},
	{Name: "claims-at-once-time", Title: "1,000 PVCs across 100 nodes, created at once → every PV created for its claim (claimRef set; kube-controller-manager, not run there, marks them Bound)",
		Package: "./operator/provisioner", Benchmark: "ClaimsAtOnce", Metric: "s-all-bound", Unit: "s", Goal: Below(60)},
	{Name: "claims-at-once-failures", Title: "… provisioning attempts that failed (a CSI call past its 10 s deadline or any other error)",
		Package: "./operator/provisioner", Benchmark: "ClaimsAtOnce", Metric: "failed-attempts", Unit: "attempts", Goal: AtMost(0)},
	{Name: "provisioning-latency", Title: "PVC created → PV created, median over 100 volumes one after the other",
		Package: "./operator/provisioner", Benchmark: "ProvisioningLatency", Metric: "ms-median", Unit: "ms"},
	{Name: "console-overview-5000", Title: "console overview at 5,000 nodes × 16 devices, server-side render of the first request after a change (median)",
		Package: "./web", Benchmark: "Overview/nodes=5000", Metric: "ms-median", Unit: "ms", Goal: Below(100)},
	{Name: "tui-first-frame-5000", Title: "TUI first frame at 5,000 nodes × 16 devices, from a snapshot it has not seen (median)",
		Package: "./tui", Benchmark: "FirstFrame/nodes=5000", Metric: "ms-median", Unit: "ms", Goal: Below(50)},
	{Name: "bundle-1000-time", Title: "`lvms bundle` at 1,000 nodes, every agent's view fetched through the API server (no pod logs: no kubelet here)",
		Package: "./diagnostics/collect", Benchmark: "Bundle/nodes=1000", Metric: "s-collect", Unit: "s", Goal: Below(30)},
	{Name: "bundle-1000-rss", Title: "… peak RSS of the `lvms bundle` process",
		Package: "./diagnostics/collect", Benchmark: "Bundle/nodes=1000", Metric: "peak-RSS-MiB", Unit: "MiB", Goal: Below(300)},
	{Name: "bundle-1000-size", Title: "… bundle size",
		Package: "./diagnostics/collect", Benchmark: "Bundle/nodes=1000", Metric: "MB-bundle", Unit: "MB", Goal: Below(2)},
	{Name: "make-run-cold", Title: "`make run` in a fresh clone, every cache empty (Go build and modules, LVMS_CACHE: control plane, node programs, image, VM image; Debian packages installed) → the demo pod Ready, its data on a LogicalVolume (2 node VMs, software emulation)",
		Package: "./sandbox", Benchmark: "MakeRun/mode=real/cache=cold", Metric: "s-to-demo", Unit: "s", Goal: Below(25 * 60)},
	{Name: "make-run-warm", Title: "… the same `make run` a second time (caches warm)",
		Package: "./sandbox", Benchmark: "MakeRun/mode=real/cache=warm", Metric: "s-to-demo", Unit: "s", Goal: Below(4 * 60)},
	{Name: "make-run-stop", Title: "… Ctrl-C → make has exited: console, node VMs, control plane stopped; no process, mount or volume group left",
		Package: "./sandbox", Benchmark: "MakeRun/mode=real/cache=warm", Metric: "s-to-stop", Unit: "s", Goal: Below(30)},
	{Name: "sandbox-ready", Title: "`make run LOCAL_FLAGS=--simulated`, caches warm: started → up, every sample settled (control plane, 3 simulated nodes, agents, operator, console)",
		Package: "./sandbox", Benchmark: "MakeRun/mode=simulated/cache=warm", Metric: "s-to-ready", Unit: "s", Goal: Below(30), Setup: &simulatedSandbox},
	{Name: "sandbox-claim-bound", Title: "… the walkthrough's claim and pod applied → the claim Bound",
		Package: "./sandbox", Benchmark: "MakeRun/mode=simulated/cache=warm", Metric: "s-claim-bound", Unit: "s", Setup: &simulatedSandbox},
	{Name: "sandbox-stop", Title: "… Ctrl-C → make has exited: every process stopped, volume groups and loop devices removed",
		Package: "./sandbox", Benchmark: "MakeRun/mode=simulated/cache=warm", Metric: "s-to-stop", Unit: "s", Goal: Below(30), Setup: &simulatedSandbox},
}

// The node footprint as deployed (e2e/footprint), in both modes: LVMS alone under make bench, beside
// TopoLVM and its CSI sidecars in the same run under make bench-peer (the ratios: ours/TopoLVM's).
func init() {
	for _, m := range []struct{ mode, node, peer string }{
		{"managed", "a managed node (the node agent; the operator runs elsewhere)", "its node pod: topolvm-node --embed-lvmd, csi-node-driver-registrar, livenessprobe"},
		{"microshift", "a MicroShift node (operator and node agent from one image, the microshift overlay)", "its controller and node pods with their sidecars, from one image"},
	} {
		bench := "NodeFootprint/mode=" + m.mode
		f := func(name, title, metric, unit string, goal *Goal) Figure {
			return Figure{Name: "footprint-" + m.mode + "-" + name, Title: title, Package: "./e2e/footprint", Benchmark: bench, Metric: metric, Unit: unit, Goal: goal}
		}
		Figures = append(Figures,
			f("pss-median", "LVMS's memory on "+m.node+": the sum of its processes' PSS, median over 6 minutes from start (100 claims a minute in, metrics and probes polled every 10 s)",
				"lvms-node-PSS-MiB-median", "MiB", nil),
			f("pss-max", "… its maximum (start-up and the burst included)", "lvms-node-PSS-MiB-max", "MiB", nil),
			f("ratio-median", "… ours/TopoLVM's on the same work in the same run ("+m.peer+"), median", "ratio-PSS-median", "", AtMost(0.5)),
			f("ratio-max", "… ours/TopoLVM's, maximum", "ratio-PSS-max", "", AtMost(0.5)),
			f("ratio-ws", "… ours/TopoLVM's cgroup working set (each pod's maximum, summed), as kubelet and metrics-server report it", "ratio-WS-max", "", nil),
			f("ratio-cpu", "… ours/TopoLVM's CPU time over the window (start-up and the burst included)", "ratio-CPU", "", AtMost(1)),
			f("procs", "processes LVMS started per hour on the node over the window (lvm commands)", "lvms-node-procs/h", "processes/h", nil),
			f("peer-procs", "… TopoLVM's", "topolvm-node-procs/h", "processes/h", nil),
		)
	}
}

// Runs are the `go test` invocations that produce the figures: one per package, each benchmark run the
// given number of times (scale benchmarks once: each iteration is a whole cluster's worth of work). Each
// states its Setup: the mode and what stands in for a cluster, which only its benchmark's code knows. The
// processes a benchmark starts, with their environment and flags, are not written here: the benchmark
// reports them (bench.ReportProcess), where it sets them.
var Runs = []Run{
	{Package: "./nodeagent/agent", Bench: "^BenchmarkNodeagentProcess$", Benchtime: "1x", Timeout: "20m", Setup: Setup{Mode: "envtest",
		Simulated: "`lvms nodeagent` as its own process, as the DaemonSet runs it, on 16 loop devices (files) in 2 volume groups with its own LVM devices file; no kubelet: nothing calls its CSI or registration sockets"}},
	{Package: "./nodeagent/agent", Bench: "^BenchmarkIdleResync$", Benchtime: "20x", Timeout: "20m", Setup: Setup{Mode: "envtest",
		Simulated: "one agent in the benchmark's process (its manager and cache; the benchmark drives its reconciles) on 16 loop devices (files) in 2 volume groups, one with a thin device class; no kubelet"}},
	// Three rounds, each with its own control plane: the time of a saturated shared machine drifts.
	{Package: "./operator/nodeset", Bench: "^BenchmarkNodeSet$", Benchtime: "1x", Timeout: "40m", Rounds: 3, Setup: Setup{Mode: "envtest",
		Simulated: "`lvms operator` as its own process (every controller, the provisioner, the CSI controller); Nodes shaped like real ones " +
			"(status with capacity, allocatable, the kubelet's Ready, MemoryPressure, DiskPressure and PIDPressure conditions, 20 images, addresses, nodeInfo), " +
			"created once: no kubelet updates them; fake agents in the benchmark's process (one controller reporting for 16 LVMNodes at a time, no client rate limit) " +
			"report what a real agent does for 16 devices in 2 volume groups (a thin pool in one) and 2 device classes, with the agent's conditions; " +
			"they write no capacity annotations on the Nodes (a real agent does)"}},
	{Package: "./operator/provisioner", Bench: "^Benchmark(CapacityNodeAdded|ClaimsAtOnce|ProvisioningLatency)$", Benchtime: "1x", Timeout: "40m", Setup: Setup{Mode: "envtest",
		Simulated: "the provisioner and CSI controller in the benchmark's process; every node's agent is csidriver's LogicalVolume reconciler on lvmsim (simulated LVM, no disks), in the same process; " +
			"Nodes with metadata only; no kubelet, no kube-controller-manager (PVs are not marked Bound)"}},
	{Package: "./operator/provisioner", Bench: "^BenchmarkProvisioned5000$", Benchtime: "1x", Timeout: "40m", Setup: Setup{Mode: "envtest",
		Simulated: "`lvms operator` as its own process (its provisioner and CSI controller, with the deployment's GOMEMLIMIT and GOGC); every node's agent is csidriver's LogicalVolume reconciler on lvmsim " +
			"(simulated LVM, no disks) in the benchmark's process; Nodes with metadata only; no kubelet"}},
	{Package: "./web", Bench: "^BenchmarkOverview$", Benchtime: "20x", Timeout: "10m", Setup: Setup{Mode: "in-process",
		Simulated: "the console's server-side render in the benchmark's process on a synthetic snapshot (consoletest.Large: nodes × 16 devices, one volume group each, every fourth device excluded, every 50th node Degraded); no API server"}},
	{Package: "./tui", Bench: "^BenchmarkFirstFrame$", Benchtime: "20x", Timeout: "10m", Setup: Setup{Mode: "in-process",
		Simulated: "the TUI's model and renderer in the benchmark's process on a synthetic snapshot (consoletest.Large: nodes × 16 devices); no API server"}},
	{Package: "./diagnostics/collect", Bench: "^BenchmarkBundle$", Benchtime: "1x", Timeout: "30m", Setup: Setup{Mode: "envtest",
		Simulated: "`lvms bundle --no-logs` as its own process; every node agent's view served by the benchmark, reached through pods/proxy; no kubelet, so no pod logs"}},
	// Cold is one fresh clone with empty caches (about half an hour); warm and simulated each run once
	// unmeasured first.
	{Package: "./sandbox", Bench: "^BenchmarkMakeRun$", Benchtime: "1x", Timeout: "150m", Setup: realSandbox},
	{Package: "./e2e/footprint", Bench: "^BenchmarkNodeFootprint$", Benchtime: "1x", Timeout: "60m", Setup: Setup{Mode: "envtest",
		Simulated: "each product's processes on the host as their manifests run them (LVMS: the arguments and environment of deploy/'s overlay and of the DaemonSet its operator writes; " +
			"TopoLVM: its chart's defaults, legacy names), each pod in a cgroup of its own, on the same API server; each node 16 loop devices (sparse files) in 2 volume groups, " +
			"its lvm2 scoped to them (a devices file) with activation off (this host has no device-mapper: logical volumes exist in the metadata only), run directly, not through nsenter; " +
			"no kubelet (the benchmark registers each CSI node service on its Node and CSINode; nothing is staged), no kube-controller-manager or scheduler (the benchmark annotates the claims as they would)"}},
}

// The sandbox benchmark measures make run in both of its modes in one go test run.
var (
	realSandbox = Setup{Mode: "real node VMs",
		Simulated: "`make run` in a fresh clone of HEAD: the control plane on the host, 2 node VMs under software emulation (qemu) running kubelet and containerd, LVMS installed from deploy/ with make image's image"}
	simulatedSandbox = Setup{Mode: "simulated",
		Simulated: "`make run LOCAL_FLAGS=--simulated` in a fresh clone of HEAD: the control plane, 3 simulated nodes (their agents on loop devices, no kubelet), the operator and the console on the host"}
)
