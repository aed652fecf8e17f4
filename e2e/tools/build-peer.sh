#!/usr/bin/env bash
# Builds the peer LVMS is measured against (make bench-peer): TopoLVM's hypertopolvm from a TopoLVM source
# checkout, and the CSI sidecars its chart runs beside it from their own checkouts, into a cache outside the
# repository keyed by each checkout's commit; prints the directory of the binaries (BenchmarkNodeFootprint's
# TOPOLVM_BIN). Nothing of these sources enters this repository.
#
#   build-peer.sh TOPOLVM_SRC [SIDECARS_SRC]
#
# SIDECARS_SRC holds checkouts named as their repositories: external-provisioner, external-resizer,
# external-snapshotter, node-driver-registrar, livenessprobe (kubernetes-csi; each vendors its modules, so
# they build offline). A sidecar without a checkout is left out of the run, and the benchmark says so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
usage="usage: $0 TOPOLVM_SRC [SIDECARS_SRC] (a TopoLVM checkout; a directory of kubernetes-csi sidecar checkouts)"
topolvm=${1:?$usage}
sidecars=${2:-}
if [[ ! -f $topolvm/cmd/hypertopolvm/main.go ]]; then
  echo "$topolvm is not a TopoLVM source checkout (no cmd/hypertopolvm/main.go): $usage" >&2
  exit 2
fi
commit() { git -C "$1" rev-parse --short=12 HEAD 2>/dev/null || echo "unversioned"; }
key="topolvm-$(commit "$topolvm")"
declare -A cmds=([external-provisioner]=csi-provisioner [external-resizer]=csi-resizer [external-snapshotter]=csi-snapshotter
  [node-driver-registrar]=csi-node-driver-registrar [livenessprobe]=livenessprobe)
present=()
if [[ -n $sidecars ]]; then
  for repo in external-provisioner external-resizer external-snapshotter node-driver-registrar livenessprobe; do
    if [[ -d $sidecars/$repo/cmd/${cmds[$repo]} ]]; then
      present+=("$repo")
      key+="_${cmds[$repo]}-$(commit "$sidecars/$repo")"
    else
      echo "no $sidecars/$repo/cmd/${cmds[$repo]}: ${cmds[$repo]} is left out" >&2
    fi
  done
fi
dir="${LVMS_CACHE:-$HOME/.cache/lvms}/peer/$key"
cache_lock "$dir"
build() { # build <binary> <module dir> <package> [go build flags]
  [[ -x "$dir/$1" ]] && return
  echo "building $1 into $dir (first time only: minutes)" >&2
  local tmp
  tmp=$(cache_tmp "$dir" "$1")
  (cd "$2" && CGO_ENABLED=0 go build "${@:4}" -trimpath -o "$tmp/$1" "$3")
  cache_publish "$tmp/$1" "$dir/$1"
  rm -rf "$tmp"
}
build hypertopolvm "$topolvm" ./cmd/hypertopolvm "-ldflags=-w -s" # as its Makefile builds it; the sidecars as their release tools do
for repo in "${present[@]}"; do
  build "${cmds[$repo]}" "$sidecars/$repo" "./cmd/${cmds[$repo]}" -mod=vendor
done
echo "$dir"
