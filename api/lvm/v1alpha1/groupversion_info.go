// Package v1alpha1 holds the lvm.topolvm.io/v1alpha1 API: LVMCluster, LVMVolumeGroup and
// LVMVolumeGroupNodeStatus, with the field names and JSON shapes LVMS (lvm-operator) clusters use today,
// extended additively with deviceAccessPolicy (shared volume groups, seed 001) and configurationPolicy
// (external lvmd.yaml, seed 002).
//
// +kubebuilder:object:generate=true
// +groupName=lvm.topolvm.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "lvm.topolvm.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
