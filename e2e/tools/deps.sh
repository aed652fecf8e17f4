#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine, once: Debian packages (lvm2, qemu, the kernel lane's
# tools, chromium), the control-plane and node binaries (built from Go modules, cached) and the playwright driver.
# Idempotent and quiet when everything is present; two runs at once install each cached thing once (lib.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

# With the argument nodes, only what `lvms local` needs for real nodes (make run): qemu, the guest's tools
# (busybox, cpio, lvm2, file systems, runc, CNI plugins) and the control plane with kubelet and containerd;
# no browser, no lock managers. With sandbox, only what `lvms local --simulated` needs (make run
# LOCAL_FLAGS=--simulated): lvm2 and the control plane without kubelets.
mode=${1:-all}
case $mode in
all | nodes | sandbox) ;;
*) echo "usage: $0 [all|nodes|sandbox]" >&2; exit 2 ;;
esac

packages=(lvm2 lvm2-lockd sanlock thin-provisioning-tools xfsprogs e2fsprogs btrfs-progs util-linux kmod
  qemu-system-x86 busybox-static cpio chromium protobuf-compiler umoci runc containernetworking-plugins
  procps jq gcc libc6-dev) # gcc builds the lock-manager tests' setrlimit shim where sanlock cannot raise its limits
# node and npm run the browser tests' playwright driver; the image may bring its own, else Debian's.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
if [[ $mode == sandbox ]]; then packages=(lvm2 thin-provisioning-tools xfsprogs e2fsprogs util-linux procps); fi
if [[ $mode == nodes ]]; then
  packages=(lvm2 thin-provisioning-tools xfsprogs e2fsprogs btrfs-progs util-linux kmod qemu-system-x86 busybox-static cpio
    runc containernetworking-plugins procps jq)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}" >&2
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

"$here/build.sh" >/dev/null
if [[ $mode == sandbox ]]; then
  "$here/build-node.sh" control-plane >/dev/null # controller-manager, scheduler, kubectl, snapshot controller
  exit 0
fi
if [[ $mode == nodes ]]; then
  "$here/build-node.sh" >/dev/null # the control plane's and the nodes' programs: kubelet, containerd
  exit 0
fi
"$here/build-node.sh" >/dev/null # the real-node tier: controller-manager, scheduler, kubelet, kubectl, containerd

# The browser tests' driver: npm playwright-core, the version playwright-go v0.5200.x pairs with, laid out as
# playwright-go expects (<drv>/package/cli.js) and run with the system's node against Debian's chromium:
# playwright never downloads anything. The console's browser test looks here (or at PLAYWRIGHT_DRIVER_PATH).
# npm installs into a temporary directory under the lock (lib.sh), which is renamed to npm/ once complete;
# drv/package then points into it.
pw_version=1.52.0
pw_dir="${LVMS_CACHE:-$HOME/.cache/lvms}/playwright-${pw_version}"
cache_lock "$pw_dir"
mkdir -p "$pw_dir/drv"
if ! node "$pw_dir/drv/package/cli.js" --version 2>/dev/null | grep -q "$pw_version"; then
  echo "installing playwright-core@${pw_version} into $pw_dir" >&2
  tmp=$(cache_tmp "$pw_dir" npm)
  echo '{"name": "lvms-playwright-driver", "private": true}' >"$tmp/package.json"
  (cd "$tmp" && npm install --no-audit --no-fund --loglevel=error "playwright-core@${pw_version}" >/dev/null)
  node "$tmp/node_modules/playwright-core/cli.js" --version | grep -q "$pw_version"
  cache_publish "$tmp" "$pw_dir/npm"
  cache_link "$pw_dir" ../npm/node_modules/playwright-core "$pw_dir/drv/package"
fi
cache_link "$pw_dir" "$(command -v node)" "$pw_dir/drv/node"
