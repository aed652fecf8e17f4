package csicontroller

import (
	"context"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// CreateSnapshot implements csi.ControllerServer: a read-only thin snapshot on the source's node, in its
// device class (thick classes answer Unimplemented from the node).
func (s *Controller) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	if req.GetSourceVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "source_volume_id is required")
	}
	name := strings.ToLower(req.GetName())
	defer s.nameLocks.lock(name)()
	source, err := s.volumes.byVolumeID(ctx, req.GetSourceVolumeId())
	if err != nil {
		return nil, err
	}
	if source == nil {
		return nil, status.Errorf(codes.NotFound, "source volume %s not found", req.GetSourceVolumeId())
	}
	if existing, err := s.volumes.byName(ctx, name); err == nil && existing.Spec.Source != source.Name {
		return nil, status.Errorf(codes.AlreadyExists, "a snapshot named %s exists with another source", name)
	}
	spec := topolvmv1.LogicalVolumeSpec{Name: name, NodeName: source.Spec.NodeName, DeviceClass: source.Spec.DeviceClass,
		Size: source.Spec.Size, Source: source.Name, AccessType: "ro"}
	if source.Status.CurrentSize != nil {
		spec.Size = *source.Status.CurrentSize
	}
	lv, err := s.createLogicalVolume(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{
		SnapshotId:     lv.Status.VolumeID,
		SourceVolumeId: req.GetSourceVolumeId(),
		SizeBytes:      lv.Status.CurrentSize.Value(),
		CreationTime:   timestamppb.New(lv.CreationTimestamp.Time),
		ReadyToUse:     true,
	}}, nil
}

// DeleteSnapshot implements csi.ControllerServer; a snapshot that does not exist is deleted already.
func (s *Controller) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if err := s.deleteByID(ctx, req.GetSnapshotId(), "snapshot_id"); err != nil {
		return nil, err
	}
	return &csi.DeleteSnapshotResponse{}, nil
}
