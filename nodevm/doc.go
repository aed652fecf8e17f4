// Package nodevm makes VMs of localvm Kubernetes nodes: each guest runs containerd 2, runc and kubelet
// (Serve), with a CNI bridge for pods and virtio disks for LVM, against a control plane on the host
// (localcluster). Binaries are built from Go modules and cached (e2e/tools/build-node.sh); images are
// imported into containerd, never pulled: the product's from `make image`, a pause image built from
// ./pause, and a busybox image for workloads (WriteImages). The first node to import a set of images leaves
// containerd's state as a seed under $LVMS_CACHE/nodeseed (seed.go), and later nodes unpack that instead
// of importing again (over two minutes of a node's start under emulation, against seconds). `lvms local`
// runs its nodes with it; so does the real-node test tier (e2e/node).
//
// The network: each VM sits on its own restricted qemu user-mode network and reaches only the API server.
// Pods reach it as the `kubernetes` Service: the guest owns that ClusterIP and relays it to the host, in
// place of kube-proxy, because it is the only Service the product's pods dial. The API server reaches
// kubelets and pods (logs, exec, port-forward, the proxy subresources, webhooks) through its egress
// selector: an HTTP CONNECT proxy on the host (localcluster.NewEgressProxy with Nodes.Dial) and a tunnel
// into the VM that owns the address.
package nodevm
