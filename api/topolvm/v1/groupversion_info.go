// Package v1 holds topolvm.io/v1 LogicalVolume, field-for-field compatible with TopoLVM so that existing
// LogicalVolume objects and PVs keep working. The same CRD is published under the legacy group
// topolvm.cybozu.com (deploy/crds, generated from this one) for clusters that still run in legacy mode.
//
// +kubebuilder:object:generate=true
// +groupName=topolvm.io
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

const (
	// GroupName is the API group (and CSI driver name) of TopoLVM.
	GroupName = "topolvm.io"
	// LegacyGroupName is TopoLVM's group before its rename, used with the legacy switch.
	LegacyGroupName = "topolvm.cybozu.com"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

	// SchemeBuilder registers the types of this package.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
