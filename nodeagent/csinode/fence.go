package csinode

import (
	"context"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	mountutil "k8s.io/mount-utils"

	"github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// The fence keeps a volume that is the source of a move (api/move AnnotationHold) from being published: a pod
// that wrote it while it is copied would write what the move leaves behind. The node agent's move fence
// (nodeagent/movefence) holds a volume here and reports the hold only once Hold said no publication stands;
// from then on NodePublishVolume, which takes the same lock, refuses the volume.

// Refusal is a publication the node service refused because a move holds the volume.
type Refusal struct {
	// VolumeID is the volume's ID, LogicalVolume the name of its LogicalVolume, MoveID the move holding it.
	VolumeID, LogicalVolume, MoveID string
	// Pod is "<namespace>/<name>" of the pod kubelet published for ("" when kubelet sent no pod info).
	Pod string
}

// Hold refuses every publication of volumeID from now on, for move moveID, and returns the paths where the
// volume is published still (a mounted file system or a bind-mounted block device, from the mount table).
func (n *Node) Hold(ctx context.Context, volumeID, moveID string) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.held[volumeID] = moveID
	lv, _, err := n.findLV(ctx, volumeID)
	if err != nil {
		return nil, err
	}
	return n.publications(n.moveDevice(lv.GetPath()))
}

// moveDevice is where the fence finds the device lvmd names path (/dev/<vg>/<lv>).
func (n *Node) moveDevice(path string) string {
	if n.opts.MoveDeviceDir == "" {
		return path
	}
	return filepath.Join(n.opts.MoveDeviceDir, strings.TrimPrefix(path, "/dev/"))
}

// Release ends the hold of volumeID.
func (n *Node) Release(volumeID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.held, volumeID)
}

// Device is the device file of volumeID, with where it is published (see Hold): the move fence reads a held
// volume through it.
func (n *Node) Device(ctx context.Context, volumeID string) (string, []string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	lv, _, err := n.findLV(ctx, volumeID)
	if err != nil {
		return "", nil, err
	}
	device := n.moveDevice(lv.GetPath())
	pubs, err := n.publications(device)
	return device, pubs, err
}

// refuseHeld refuses the publication of a held volume; n.mu is held. The hold is the fence's own (set by
// Hold) or, until the fence looked at the volume after the agent started, its LogicalVolume's annotation.
func (n *Node) refuseHeld(volumeID string, lv *topolvmv1.LogicalVolume, volumeContext map[string]string) error {
	moveID, name := n.held[volumeID], ""
	if lv != nil {
		name = lv.Name
		if moveID == "" {
			moveID = lv.Annotations[move.AnnotationHold]
		}
	}
	if moveID == "" {
		return nil
	}
	pod := ""
	if ns, p := volumeContext["csi.storage.k8s.io/pod.namespace"], volumeContext["csi.storage.k8s.io/pod.name"]; ns != "" && p != "" {
		pod = ns + "/" + p
	}
	if n.opts.OnRefused != nil {
		n.opts.OnRefused(Refusal{VolumeID: volumeID, LogicalVolume: name, MoveID: moveID, Pod: pod})
	}
	return status.Errorf(codes.FailedPrecondition,
		"volume %s (LogicalVolume %s) is the source of volume move %s and may not be used until the move is aborted or confirmed: its claim moves to another node (see lvms move status; lvms move abort stops it)",
		volumeID, name, moveID)
}

// publications lists the mount points where device is published, from the mount table: a file system on it
// (by its device number, or its source for a file system with an anonymous one, such as btrfs) and the device
// file itself bind-mounted for a block volume (a device node's mount keeps its file system's type, devtmpfs or
// tmpfs: only those mount points are looked at, so a hung network mount is never touched).
func (n *Node) publications(device string) ([]string, error) {
	var st unix.Stat_t
	if err := unix.Stat(device, &st); err != nil {
		return nil, status.Errorf(codes.Internal, "stat %s: %v", device, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return nil, status.Errorf(codes.Internal, "%s is not a block device", device)
	}
	path := n.opts.MountInfo
	if path == "" {
		path = "/proc/self/mountinfo"
	}
	mounts, err := mountutil.ParseMountInfo(path)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "read the mount table %s: %v", path, err)
	}
	isDevice := func(p string, kinds ...uint32) bool {
		var s unix.Stat_t
		return unix.Stat(p, &s) == nil && slices.Contains(kinds, s.Mode&unix.S_IFMT) && s.Rdev == st.Rdev
	}
	var out []string
	for _, m := range mounts {
		fsMount := uint32(m.Major) == unix.Major(st.Rdev) && uint32(m.Minor) == unix.Minor(st.Rdev) ||
			m.Major == 0 && strings.HasPrefix(m.Source, "/dev/") && isDevice(m.Source, unix.S_IFBLK)
		nodeMount := (m.FsType == "devtmpfs" || m.FsType == "tmpfs") && m.Root != "/" && isDevice(m.MountPoint, unix.S_IFBLK)
		if fsMount || nodeMount {
			out = append(out, m.MountPoint)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
