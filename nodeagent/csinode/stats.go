package csinode

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeGetVolumeStats implements csi.NodeServer: statfs bytes and inodes of a mounted file system, the
// size of a block volume, and the LV's health as the volume condition.
func (n *Node) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if err := checkRequest(req.GetVolumeId(), "volume_path", req.GetVolumePath()); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	info, err := os.Stat(req.GetVolumePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume path %s does not exist", req.GetVolumePath())
	} else if err != nil {
		return nil, status.Errorf(codes.Internal, "stat %s: %v", req.GetVolumePath(), err)
	}
	lv, _, err := n.findLV(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	resp := &csi.NodeGetVolumeStatsResponse{VolumeCondition: Condition(lv.GetAttr())}
	if !info.IsDir() {
		size, err := blockSize(req.GetVolumePath())
		if err != nil {
			return nil, status.Errorf(codes.Internal, "size of %s: %v", req.GetVolumePath(), err)
		}
		resp.Usage = []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: size}}
		return resp, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(req.GetVolumePath(), &st); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", req.GetVolumePath(), err)
	}
	bs := st.Frsize
	resp.Usage = []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Used: int64(st.Blocks-st.Bfree) * bs, Available: int64(st.Bavail) * bs},
		{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Used: int64(st.Files - st.Ffree), Available: int64(st.Ffree)},
	}
	return resp, nil
}

// blockSize is a block device's (or file's) size, by seeking to its end.
func blockSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	return f.Seek(0, io.SeekEnd)
}

// Condition maps lv_attr to a CSI volume condition: health (character 9: p partial, X unknown, r/m/s/R/w
// RAID trouble, F/D/M thin pool trouble) and state (character 5: suspended, invalid snapshot, mapped
// without tables...) flag a volume as abnormal.
func Condition(attr string) *csi.VolumeCondition {
	if len(attr) < 10 {
		return &csi.VolumeCondition{Abnormal: true, Message: "the LV's attributes are unknown (lv_attr " + attr + ")"}
	}
	if msg, ok := healthProblems[attr[8]]; ok {
		return &csi.VolumeCondition{Abnormal: true, Message: msg}
	}
	if msg, ok := stateProblems[attr[4]]; ok {
		return &csi.VolumeCondition{Abnormal: true, Message: msg}
	}
	return &csi.VolumeCondition{Message: "the LV is healthy"}
}

var healthProblems = map[byte]string{
	'p': "the LV is partial: a physical volume of its volume group is missing",
	'X': "the LV's health is unknown",
	'r': "a RAID image of the LV needs refreshing",
	'm': "the RAID LV has mismatches",
	's': "a RAID image of the LV is out of sync",
	'R': "the RAID LV has a failed image to replace",
	'w': "the RAID LV's writemostly image is failing",
	'F': "the LV's thin pool has failed",
	'D': "the LV's thin pool is out of data space",
	'M': "the LV's thin pool metadata is read-only",
	'E': "the LV's device has write errors",
}

var stateProblems = map[byte]string{
	's': "the LV is suspended",
	'I': "the snapshot is invalid",
	'S': "the snapshot is invalid and suspended",
	'm': "the snapshot merge failed",
	'M': "the snapshot merge failed and the LV is suspended",
	'd': "the LV is mapped but has no tables",
	'i': "the LV is mapped with inactive tables",
	'X': "the LV's state is unknown",
}

// NodeExpandVolume implements csi.NodeServer: grows the file system on a mounted volume (a block volume
// has nothing to grow).
func (n *Node) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	if err := checkRequest(req.GetVolumeId(), "volume_path", req.GetVolumePath()); err != nil {
		return nil, err
	}
	if r := req.GetCapacityRange(); r != nil && (r.GetRequiredBytes() < 0 || r.GetLimitBytes() < 0 ||
		(r.GetLimitBytes() > 0 && r.GetRequiredBytes() > r.GetLimitBytes())) {
		return nil, status.Errorf(codes.InvalidArgument, "invalid capacity range: required %d, limit %d", r.GetRequiredBytes(), r.GetLimitBytes())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	lv, _, err := n.findLV(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if req.GetVolumeCapability().GetBlock() != nil {
		return &csi.NodeExpandVolumeResponse{}, nil
	}
	path, err := filepath.EvalSymlinks(req.GetVolumePath())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "volume path %s: %v", req.GetVolumePath(), err)
	}
	if info, err := os.Stat(path); err == nil && !info.IsDir() {
		return &csi.NodeExpandVolumeResponse{}, nil // a published block volume
	}
	if _, err := n.mountedDevice(path); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not mounted on %s: publish it before expanding", req.GetVolumeId(), path)
	}
	if _, err := n.resizer.Resize(lv.GetPath(), path); err != nil {
		return nil, status.Errorf(codes.Internal, "grow the file system of volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.NodeExpandVolumeResponse{}, nil
}
