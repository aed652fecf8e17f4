// Package sandbox is `lvms local` (and `make run`): a whole LVMS installation on one machine, with
// simulated nodes. It starts a real control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and the snapshot controller, localcluster, from the binaries e2e/tools builds and caches),
// installs the CRDs, registers three Nodes and renews their node Leases as a kubelet would (there is no
// kubelet: pods are scheduled but never run), gives each node loop-device "disks" (sparse files under a
// state directory: different sizes, one carrying an ext4 signature, one with a partition table), runs one
// node agent per node in-process — each with its own LVM devices file and its own view of
// /dev/disk/by-id — runs `lvms operator` as a process with the flags it is installed with (so the
// provisioner, moves, capacity publisher and console run as in a cluster), applies sample LVMNodeSets and an
// LVMCluster on different nodes, writes a kubeconfig and says what to do next. Ctrl-C stops everything and
// removes the loop devices and volume groups; the next start also cleans up after a run that crashed.
//
// The disks and the per-node device links are also what the operator's integration suites use (Link,
// WriteMBR, NewAgent).
package sandbox
