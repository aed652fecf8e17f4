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
)

// ControllerExpandVolume implements csi.ControllerServer: it sets the LogicalVolume's size and waits for
// the node to grow the LV. The file system grows in NodeExpandVolume.
func (s *Controller) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is required")
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity_range is required")
	}
	defer s.ids.lock(id)()
	lv, err := s.volumes.byVolumeID(ctx, id)
	if err != nil {
		return nil, err
	}
	if lv == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", id)
	}
	size, err := requestSize(req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes(), 0)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
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
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.volumes.byName(ctx, lv.Name)
		if err != nil {
			return err
		}
		cur.Spec.Size = quantity(size)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[s.names.ResizeRequestedAt()] = time.Now().UTC().Format(time.RFC3339Nano)
		return s.client.Update(ctx, cur)
	})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "set size of LogicalVolume %s: %v", lv.Name, err)
	}
	grown, err := s.volumes.waitResized(ctx, lv.Name, size)
	if err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: grown.Status.CurrentSize.Value(), NodeExpansionRequired: nodeExpansion}, nil
}
