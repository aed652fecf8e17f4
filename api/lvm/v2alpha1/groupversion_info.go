// Package v2alpha1 holds the lvm.topolvm.io/v2alpha1 API of seed 000: LVMNodeSet (nodes + a template, like a
// DaemonSet) and LVMNode (one per node: the template as spec, and what the node agent found as status).
//
// Decisions beyond the seed's YAML are written on the fields they concern; the main ones:
//   - Volume groups carry accessPolicy (NodeLocal|Shared). A Shared volume group is the Subprovisioner path
//     (seed 001): one VG on a LUN every selected node sees, locked with lvmlockd/sanlock; its device classes
//     must be Thick and have no filesystem (raw block volumes served by the shared driver).
//   - Device selector keys and operators are a closed set (DeviceSelectorKey, DeviceSelectorOperator).
//   - StorageClass and VolumeSnapshotClass names are <prefix>-<deviceClass> with namingPolicy Prefixed (the
//     seed's status example names them after the VG, which collides once two classes share a VG), or an
//     exact name with namingPolicy Explicit (used to keep v1 names on migration).
//   - Excluded devices keep the seed's reasons (sentences) and add reasonCodes in the same order.
//
// +kubebuilder:object:generate=true
// +groupName=lvm.topolvm.io
package v2alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "lvm.topolvm.io", Version: "v2alpha1"}

	// SchemeBuilder registers the types of this package.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
