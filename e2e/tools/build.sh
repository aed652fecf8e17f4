#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl from Go modules (versions pinned in go.mod) into a cache outside the
# repository, keyed by version, and prints the directory to use as KUBEBUILDER_ASSETS (envtest's layout, which
# holds kubectl too: `lvms bundle serve`'s test runs it). A second run only checks the cache; two runs at once
# build once (lib.sh: the directory's lock, binaries renamed into place once complete).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
k8s=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(cd "$here" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
dir="${LVMS_CACHE:-$HOME/.cache/lvms}/controlplane/k8s-${k8s}_etcd-${etcd}"
cache_lock "$dir"
cache_go_build "$dir" etcd "$here" ./etcd
cache_go_build "$dir" kube-apiserver "$here" k8s.io/kubernetes/cmd/kube-apiserver
cache_go_build "$dir" kubectl "$here" k8s.io/kubernetes/cmd/kubectl
echo "$dir"
