// Package cluster starts a real Kubernetes control plane on the host for the test tier whose VMs run
// kubelet and containerd: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, each its own
// process, with a PKI made for the run (one CA, an API serving certificate carrying the addresses guests
// dial, client certificates for every component) and kubeconfigs for any user, such as a kubelet's
// system:node:<name>.
//
// It is not envtest (sigs.k8s.io/controller-runtime/pkg/envtest, used by e2e/testenv) because envtest's
// serving certificate names only localhost and 127.0.0.1, so a kubelet in a guest cannot verify the API
// server, and envtest runs no controller-manager and no scheduler, so nothing turns a Deployment into pods
// or binds them to nodes. This package also switches on what real nodes rely on and envtest leaves off:
// the Node authorizer, NodeRestriction, ServiceAccount tokens and the kube-root-ca.crt ConfigMap.
//
// The API server listens on 127.0.0.1 only; the tier relays guests to it, and reaches into guests the other
// way through an EgressProxy (HTTP CONNECT on a unix socket) for logs, exec and the node proxy.
package localcluster
