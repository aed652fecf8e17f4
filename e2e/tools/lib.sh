# shellcheck shell=bash
# Sourced by build.sh, build-node.sh and deps.sh: what keeps their caches under $LVMS_CACHE right when two
# `make` commands (or test binaries) run them at once, or one is killed. Each cached artifact's directory has
# a lock file, .lock: its builders take it in turn (the second waits, then finds the artifact built). Every
# artifact is built under a temporary name in the same directory (.tmp.*) and renamed into place once
# complete, so a reader never sees it half-written; what a killed build leaves is only a temporary name,
# removed by the next holder of the lock. The Go side (package buildcache) uses the same names.

# cache_lock <dir>: creates <dir> and takes an exclusive flock on <dir>/.lock, saying so on stderr when it
# has to wait; held until the script and its children have ended (a build orphaned by a killed script holds
# it until it ends too). Then removes what killed builds left in <dir>.
cache_lock() {
  mkdir -p "$1"
  exec {cache_lock_fd}>>"$1/.lock"
  if ! flock -n "$cache_lock_fd"; then
    echo "waiting for another run building into $1 (lock $1/.lock)" >&2
    flock "$cache_lock_fd"
  fi
  rm -rf "$1"/.tmp.*
}

# cache_tmp <dir> <name>: prints a new directory in <dir> to build <name> in (hold <dir>'s lock).
cache_tmp() {
  local tmp
  tmp=$(mktemp -d "$1/.tmp.$2.XXXXXX")
  chmod 755 "$tmp"
  echo "$tmp"
}

# cache_publish <src> <dst>: renames <src> to <dst>, replacing it (a directory <dst> is removed first).
# A file or symlink is replaced atomically: a reader sees the old one or the new one, never neither.
cache_publish() {
  if [[ -d $2 && ! -L $2 ]]; then rm -rf "$2"; fi
  mv -fT "$1" "$2"
}

# cache_link <dir> <target> <link>: points the symlink <link> at <target>, replacing it atomically (hold the
# lock of <dir>, where the new link is made before it is renamed to <link>).
cache_link() {
  [[ -L $3 && $(readlink "$3") == "$2" ]] && return
  local tmp
  tmp=$(cache_tmp "$1" link)
  ln -s "$2" "$tmp/link"
  cache_publish "$tmp/link" "$3"
  rmdir "$tmp"
}

# cache_go_build <dir> <binary> <module dir> <package>: unless <dir>/<binary> is there, builds <package> in
# <module dir> (static, trimmed) under a temporary name and publishes it as <dir>/<binary> (hold the lock).
cache_go_build() {
  [[ -x "$1/$2" ]] && return
  echo "building $2 into $1 (first time only: minutes)" >&2
  local tmp
  tmp=$(cache_tmp "$1" "$2")
  (cd "$3" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$tmp/$2" "$4")
  chmod 755 "$tmp/$2"
  cache_publish "$tmp/$2" "$1/$2"
  rm -rf "$tmp"
}
