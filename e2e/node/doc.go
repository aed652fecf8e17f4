// Package node is the real-node tier: the product installed and used the way a cluster admin does, on
// nodes that are real kubelets. The control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler; localcluster) runs on the host; each node is a VM of the lane (nodevm on localvm:
// Debian's kernel, software emulation) running containerd 2, runc and kubelet.
//
// A test begins with `if vm.InGuest() { node.Serve(t); return }` and then calls Start.
package node
