// Package image assembles the LVMS container image without a container engine: a root file system
// unpacked from pinned Debian packages (packages.lock) plus the static lvms binary, written as an OCI image
// layout and an oci-archive tarball with go-containerregistry. Builds are reproducible: entries are sorted,
// owners and times fixed, the same inputs give the same digest.
//
// The image contract (README "Image"): the entrypoint is /usr/bin/lvms, /usr/bin/gather is the
// must-gather entrypoint, the default user is 65532 (the operator runs as it; the node agent's DaemonSet
// runs as root, privileged). The node agent runs lvm2, lsblk, mkfs and mount on the host through nsenter
// by default, so they match the host's kernel, lvm.conf, udev and lvmlockd; the image's own copies serve
// --host-nsenter=false (hosts without them) and support tooling.
package image
