// Package csidriver assembles the whole TopoLVM-compatible driver in one test process against a real
// API server (e2e/testenv): the CSI controller service, and per simulated node the lvmd service, the
// LogicalVolume reconciler, the capacity exporter and the CSI node service. There is no real node: each
// node's lvm2 is the stateful lvmsim stand-in, its mounts mount-utils' FakeMounter and its mkfs/blkid the
// stateful fakeexec, and the test plays kubelet by labelling Node objects with the topology key. The VM
// lane runs the same services against real lvm2, mkfs and mount.
package csidriver
