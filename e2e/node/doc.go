// Package node is the real-node tier: the product installed and used the way a cluster admin does, on
// nodes that are real kubelets. The control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler; localcluster) runs on the host; each node is a VM of the lane (e2e/vm: Debian's kernel,
// software emulation) running containerd 2, runc and kubelet, with a CNI bridge for pods and virtio disks
// for LVM. Binaries are built from Go modules and cached (e2e/tools/build-node.sh); images are imported
// into containerd, never pulled: the product's from `make image`, a pause image built from ./pause, and a
// busybox image for workloads.
//
// The network: each VM sits on its own restricted qemu user-mode network and reaches only the API server.
// Pods reach it as the `kubernetes` Service: the guest owns that ClusterIP and relays it to the host, in
// place of kube-proxy, because it is the only Service the product's pods dial. The API server reaches
// kubelets and pods (logs, exec, the proxy subresources, webhooks) through its egress selector: an HTTP
// CONNECT proxy in the test process and a tunnel into the VM that owns the address.
//
// A test begins with `if vm.InGuest() { node.Serve(t); return }` and then calls Start.
package node
