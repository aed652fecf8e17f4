// Package sandbox is `lvms local` (and `make run`): a whole LVMS installation in one process on one
// machine. It starts etcd and kube-apiserver (the binaries e2e/tools/build.sh builds and caches), installs
// the CRDs, registers three Nodes, gives each node loop-device "disks" (sparse files under a state
// directory: different sizes, one carrying an ext4 signature, one with a partition table), runs one node
// agent per node in-process — each with its own LVM devices file and its own view of /dev/disk/by-id —
// runs the operator in-process, applies sample LVMNodeSets and an LVMCluster on different nodes, writes a
// kubeconfig and says what to do next. Ctrl-C stops everything and removes the loop devices and volume
// groups; the next start also cleans up after a run that crashed.
//
// The disks and the per-node device links are also what the operator's integration suites use (Link,
// WriteMBR, NewAgent).
package sandbox
