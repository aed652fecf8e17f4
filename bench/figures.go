package bench

// Figures are the numbers LVMS promises about its footprint and speed at scale (issue "Footprint and
// scale"), each with the benchmark that measures it and its goal. `make bench` runs every Run and fills
// this table; the README's performance table is rendered from its results.
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
	{Name: "nodeset-500-time", Title: "LVMNodeSet over 500 nodes, created → every LVMNode Ready (fake agents, real API server)",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=500", Metric: "s-to-ready", Unit: "s", Goal: Below(10)},
	{Name: "nodeset-500-rss", Title: "… `lvms operator` RSS a minute later, idle (steady state, memory trimmed)",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=500", Metric: "idle-RSS-MiB", Unit: "MiB", Goal: Below(40)},
	{Name: "nodeset-500-rss-ready", Title: "… `lvms operator` RSS at the moment every LVMNode is Ready (code of the burst resident)",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=500", Metric: "RSS-MiB", Unit: "MiB"},
	{Name: "nodeset-5000-time", Title: "LVMNodeSet over 5,000 nodes, created → every LVMNode Ready",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=5000", Metric: "s-to-ready", Unit: "s", Goal: Below(60)},
	{Name: "nodeset-5000-rss", Title: "… `lvms operator` RSS at that point",
		Package: "./operator/nodeset", Benchmark: "NodeSet/nodes=5000", Metric: "RSS-MiB", Unit: "MiB", Goal: Below(200)},
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
}

// Runs are the `go test` invocations that produce the figures: one per package, each benchmark run the
// given number of times (scale benchmarks once: each iteration is a whole cluster's worth of work).
var Runs = []Run{
	{Package: "./nodeagent/agent", Bench: "^BenchmarkNodeagentProcess$", Benchtime: "1x", Timeout: "20m"},
	{Package: "./nodeagent/agent", Bench: "^BenchmarkIdleResync$", Benchtime: "20x", Timeout: "20m"},
	// Three rounds, each with its own control plane: the time of a saturated shared machine drifts.
	{Package: "./operator/nodeset", Bench: "^BenchmarkNodeSet$", Benchtime: "1x", Timeout: "40m", Rounds: 3},
	{Package: "./operator/provisioner", Bench: "^Benchmark(CapacityNodeAdded|ClaimsAtOnce|ProvisioningLatency)$", Benchtime: "1x", Timeout: "40m"},
	{Package: "./operator/provisioner", Bench: "^BenchmarkProvisioned5000$", Benchtime: "1x", Timeout: "40m"},
	{Package: "./web", Bench: "^BenchmarkOverview$", Benchtime: "20x", Timeout: "10m"},
	{Package: "./tui", Bench: "^BenchmarkFirstFrame$", Benchtime: "20x", Timeout: "10m"},
	{Package: "./diagnostics/collect", Bench: "^BenchmarkBundle$", Benchtime: "1x", Timeout: "30m"},
}
