package csicontroller

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// ControllerExpandVolume implements csi.ControllerServer: it sets the LogicalVolume's size and waits for
// the node to grow the LV. The file system grows in NodeExpandVolume.
func (s *Controller) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	size, err := expandRequest(req)
	if err != nil {
		return nil, err
	}
	id := req.GetVolumeId()
	defer s.ids.lock(id)()
	lv, err := s.volumes.byVolumeID(ctx, id)
	if err != nil {
		return nil, err
	}
	if lv == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	nodeExpansion := req.GetVolumeCapability().GetBlock() == nil
	var current int64
	if lv.Status.CurrentSize != nil {
		current = lv.Status.CurrentSize.Value()
	}
	if size <= current {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: current, NodeExpansionRequired: nodeExpansion}, nil
	}

	node := &corev1.Node{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: lv.Spec.NodeName}, node); err != nil {
		return nil, status.Errorf(codes.Internal, "get node %s of volume %s: %v", lv.Spec.NodeName, id, err)
	}
	if free := s.nodeCapacity(node, lv.Spec.DeviceClass); free < size-current {
		return nil, status.Errorf(codes.Internal, "not enough space on node %s to grow volume %s by %d bytes: %d bytes free in device class %q",
			lv.Spec.NodeName, id, size-current, free, className(lv.Spec.DeviceClass))
	}
	grown, err := s.volumes.grow(ctx, lv.Name, size, s.names.ResizeRequestedAt())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: grown.Status.CurrentSize.Value(), NodeExpansionRequired: nodeExpansion}, nil
}

// expandRequest checks an expansion request and returns the size it asks for.
func expandRequest(req *csi.ControllerExpandVolumeRequest) (int64, error) {
	if req.GetVolumeId() == "" {
		return 0, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if req.GetCapacityRange() == nil {
		return 0, status.Error(codes.InvalidArgument, "capacity_range is required")
	}
	size, err := requestSize(req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes(), 0)
	if err != nil {
		return 0, status.Error(codes.InvalidArgument, err.Error())
	}
	return size, nil
}

// grow sets a LogicalVolume's size, and in annotation when that was asked, and waits until the node that
// does its work grew the LV.
func (v *volumes) grow(ctx context.Context, name string, size int64, annotation string) (*topolvmv1.LogicalVolume, error) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := v.byName(ctx, name)
		if err != nil {
			return err
		}
		cur.Spec.Size = quantity(size)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[annotation] = time.Now().UTC().Format(time.RFC3339Nano)
		return v.client.Update(ctx, cur)
	})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "set size of LogicalVolume %s: %v", name, err)
	}
	return v.waitResized(ctx, name, size)
}
