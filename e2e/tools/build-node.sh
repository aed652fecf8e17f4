#!/usr/bin/env bash
# Builds the node tier's binaries from Go modules into a cache outside the repository, keyed by version, and
# prints the directory: kube-controller-manager, kube-scheduler, kubelet and kubectl (k8s.io/kubernetes, the
# version of the API server build.sh builds), containerd 2 with its runc shim and ctr (./containerd), and the
# snapshot controller (./snapshotter).
# runc and the CNI plugins come from Debian (deps.sh). A second run only checks the cache.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
k8s=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
ctrd=$(cd "$here/containerd" && go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)
snap=$(cd "$here/snapshotter" && go list -m -f '{{.Version}}' github.com/kubernetes-csi/external-snapshotter/v8)
dir="${LVMS_CACHE:-$HOME/.cache/lvms}/node/k8s-${k8s}_containerd-${ctrd}"
build() { # build <module dir> <package> <binary>
  [[ -x "$dir/$3" ]] && return
  echo "building $3 into $dir (first time only: minutes)" >&2
  (cd "$1" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$dir/$3.tmp" "$2" && mv "$dir/$3.tmp" "$dir/$3")
}
mkdir -p "$dir"
for cmd in kube-controller-manager kube-scheduler kubelet kubectl; do
  build "$here" "k8s.io/kubernetes/cmd/$cmd" "$cmd"
done
# no_btrfs: the btrfs snapshotter needs cgo and the node tier uses overlayfs.
GOFLAGS="${GOFLAGS:-} -tags=no_btrfs" build "$here/containerd" github.com/containerd/containerd/v2/cmd/containerd containerd
build "$here/containerd" github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 containerd-shim-runc-v2
build "$here/containerd" github.com/containerd/containerd/v2/cmd/ctr ctr
# The snapshot controller is versioned apart; its binary name carries the version.
build "$here/snapshotter" github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller "snapshot-controller-${snap}"
ln -sfn "snapshot-controller-${snap}" "$dir/snapshot-controller"
echo "$dir"
