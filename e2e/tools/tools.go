//go:build tools

// Package tools pins the binaries the tests build from Go modules: the control plane (kube-apiserver,
// kube-controller-manager, kube-scheduler from k8s.io/kubernetes; etcd from go.etcd.io/etcd/server/v3, see
// ./etcd), and the node tier's kubelet and kubectl at the same version. build.sh and build-node.sh build them
// into a cache keyed by version; containerd has its own module (./containerd) so its dependencies never meet
// ours.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
