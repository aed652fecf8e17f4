#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine, once: Debian packages (lvm2, qemu, the kernel lane's
# tools, chromium) and the control-plane and node binaries (built from Go modules, cached). Idempotent and quiet when
# everything is present.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

packages=(lvm2 lvm2-lockd sanlock thin-provisioning-tools xfsprogs e2fsprogs btrfs-progs util-linux kmod
  qemu-system-x86 busybox-static cpio chromium protobuf-compiler umoci runc containernetworking-plugins
  procps gcc libc6-dev) # gcc builds the lock-manager tests' setrlimit shim where sanlock cannot raise its limits
# node and npm run the browser tests' playwright driver; the image may bring its own, else Debian's.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
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
"$here/build-node.sh" >/dev/null # the real-node tier: controller-manager, scheduler, kubelet, kubectl, containerd

# The browser tests' driver: npm playwright-core, the version playwright-go v0.5200.x pairs with, laid out as
# playwright-go expects (<drv>/package/cli.js) and run with the system's node against Debian's chromium:
# playwright never downloads anything. The console's browser test looks here (or at PLAYWRIGHT_DRIVER_PATH).
pw_version=1.52.0
pw_dir="${LVMS_CACHE:-$HOME/.cache/lvms}/playwright-${pw_version}"
if ! node "$pw_dir/drv/package/cli.js" --version 2>/dev/null | grep -q "$pw_version"; then
  echo "installing playwright-core@${pw_version} into $pw_dir" >&2
  mkdir -p "$pw_dir/drv"
  (cd "$pw_dir" && { [[ -f package.json ]] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund --loglevel=error "playwright-core@${pw_version}" >/dev/null)
  ln -sfn "$pw_dir/node_modules/playwright-core" "$pw_dir/drv/package"
  node "$pw_dir/drv/package/cli.js" --version | grep -q "$pw_version"
fi
ln -sfn "$(command -v node)" "$pw_dir/drv/node"
