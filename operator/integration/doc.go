// Package integration holds the operator's integration suites: the operator and one real node agent per
// simulated node run in-process against a real kube-apiserver and etcd, and the agents build real volume
// groups on loop devices (root only; RequireRoot fails loudly unless SKIP_TESTS_USING_ROOT=1). There is no
// kubelet and no kube-controller-manager: tests register Nodes, delete them, and drop PVC finalizers
// themselves. The host kernel has no device-mapper, so thin pools cannot be created here: the suites use
// thick device classes for Ready and check the readable reason a thin class reports.
package integration
