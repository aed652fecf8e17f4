#!/usr/bin/env bash
# Builds the node tier's binaries from Go modules into a cache outside the repository, keyed by version, and
# prints the directory: kube-controller-manager, kube-scheduler, kubelet and kubectl (k8s.io/kubernetes, the
# version of the API server build.sh builds), containerd 2 with its runc shim and ctr (./containerd), and the
# snapshot controller (./snapshotter). With the argument control-plane it builds only what a control plane
# without kubelets runs (kube-controller-manager, kube-scheduler, kubectl, the snapshot controller): the
# simulated sandbox (make run) needs no kubelet or containerd.
# runc and the CNI plugins come from Debian (deps.sh). A second run only checks the cache; two runs at once
# build once (lib.sh: the directory's lock, binaries renamed into place once complete).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
k8s=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
ctrd=$(cd "$here/containerd" && go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)
snap=$(cd "$here/snapshotter" && go list -m -f '{{.Version}}' github.com/kubernetes-csi/external-snapshotter/v8)
dir="${LVMS_CACHE:-$HOME/.cache/lvms}/node/k8s-${k8s}_containerd-${ctrd}"
cache_lock "$dir"
case "${1:-all}" in
all) nodes=true ;;
control-plane) nodes=false ;;
*) echo "usage: $0 [all|control-plane]" >&2; exit 2 ;;
esac
for cmd in kube-controller-manager kube-scheduler kubectl; do
  cache_go_build "$dir" "$cmd" "$here" "k8s.io/kubernetes/cmd/$cmd"
done
if $nodes; then
  cache_go_build "$dir" kubelet "$here" k8s.io/kubernetes/cmd/kubelet
  # no_btrfs: the btrfs snapshotter needs cgo and the node tier uses overlayfs.
  GOFLAGS="${GOFLAGS:-} -tags=no_btrfs" cache_go_build "$dir" containerd "$here/containerd" github.com/containerd/containerd/v2/cmd/containerd
  cache_go_build "$dir" containerd-shim-runc-v2 "$here/containerd" github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
  cache_go_build "$dir" ctr "$here/containerd" github.com/containerd/containerd/v2/cmd/ctr
fi
# The snapshot controller is versioned apart; its binary name carries the version.
cache_go_build "$dir" "snapshot-controller-${snap}" "$here/snapshotter" github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller
cache_link "$dir" "snapshot-controller-${snap}" "$dir/snapshot-controller"
echo "$dir"
