//go:build tools

// Package snapshotter pins the Kubernetes snapshot controller (external-snapshotter's common controller, the
// cluster component that turns a VolumeSnapshot into a VolumeSnapshotContent; the CSI side is our own
// operator's). Its own module, like ./containerd. build-node.sh builds it for the real-node tier.
package snapshotter

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
