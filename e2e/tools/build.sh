#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl from Go modules (versions pinned in go.mod) into a cache outside the
# repository, keyed by version, and prints the directory to use as KUBEBUILDER_ASSETS (envtest's layout, which
# holds kubectl too: `lvms bundle serve`'s test runs it). A second run only checks the cache.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
k8s=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(cd "$here" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
dir="${LVMS_CACHE:-$HOME/.cache/lvms}/controlplane/k8s-${k8s}_etcd-${etcd}"
if [[ ! -x "$dir/kube-apiserver" || ! -x "$dir/etcd" ]]; then
  mkdir -p "$dir"
  echo "building kube-apiserver ${k8s} and etcd ${etcd} into $dir (first time only: several minutes)" >&2
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$dir/etcd.tmp" ./etcd && mv "$dir/etcd.tmp" "$dir/etcd")
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver \
     && mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver")
fi
if [[ ! -x "$dir/kubectl" ]]; then
  echo "building kubectl ${k8s} into $dir (first time only: minutes)" >&2
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$dir/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl \
     && mv "$dir/kubectl.tmp" "$dir/kubectl")
fi
echo "$dir"
