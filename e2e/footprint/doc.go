// Package footprint measures what LVMS costs a node as deployed, side by side with TopoLVM in the same
// run: each process's PSS and RSS (/proc/PID/smaps_rollup), each pod's cgroup working set and CPU (cgroup
// v1, as kubelet reads them), and the processes each side starts (the kernel's process accounting). Its
// benchmark, BenchmarkNodeFootprint, runs under `make bench` (LVMS alone) and `make bench-peer` (with
// TopoLVM and its CSI sidecars built from sources given to it).
package footprint
