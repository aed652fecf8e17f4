#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine, once: Debian packages (lvm2, qemu, the kernel lane's
# tools, chromium) and the control-plane binaries (built from Go modules, cached). Idempotent and quiet when
# everything is present.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

packages=(lvm2 lvm2-lockd sanlock thin-provisioning-tools xfsprogs e2fsprogs util-linux kmod
  qemu-system-x86 busybox-static cpio chromium)
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
