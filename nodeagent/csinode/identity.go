package csinode

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Identity is the CSI Identity service, the same for the controller and the node.
type Identity struct {
	csi.UnimplementedIdentityServer
	name, version string
	ready         func(context.Context) error
	groups        bool
}

var _ csi.IdentityServer = (*Identity)(nil)

// NewIdentity returns the identity of driver name at version; ready (nil: always ready) answers Probe.
func NewIdentity(name, version string, ready func(context.Context) error) *Identity {
	return &Identity{name: name, version: version, ready: ready}
}

// WithGroupController makes the identity advertise the GroupController service (the operator's socket, when
// group snapshots are served).
func (i *Identity) WithGroupController() *Identity {
	i.groups = true
	return i
}

// GetPluginInfo implements csi.IdentityServer.
func (i *Identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: i.version}, nil
}

// GetPluginCapabilities implements csi.IdentityServer: controller service, topology, and online and
// offline expansion, as TopoLVM; and the group controller service when WithGroupController was called.
func (i *Identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	svc := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	exp := func(t csi.PluginCapability_VolumeExpansion_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: t}}}
	}
	caps := []*csi.PluginCapability{
		svc(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		svc(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		exp(csi.PluginCapability_VolumeExpansion_ONLINE),
		exp(csi.PluginCapability_VolumeExpansion_OFFLINE),
	}
	if i.groups {
		caps = append(caps, svc(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE))
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe implements csi.IdentityServer.
func (i *Identity) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if i.ready != nil {
		if err := i.ready(ctx); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "not ready: %v", err)
		}
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
