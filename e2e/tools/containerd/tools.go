//go:build tools

// Package containerd pins containerd 2 for the node tier (Debian 12 ships 1.6; kubelets past 1.35 need 2.x).
// It is its own module so containerd's dependencies never constrain ours. build-node.sh builds containerd,
// its runc shim and ctr from here.
package containerd

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
