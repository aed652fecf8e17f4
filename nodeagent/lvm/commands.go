package lvm

import (
	"context"
	"fmt"
	"strconv"
)

// OwnerTag is the LVM tag on every volume group LVMS manages. lvm-operator (LVMS) uses the same tag, so
// volume groups it created are recognised as ours after a migration. The agent never changes a volume group
// without it.
const OwnerTag = "lvms"

// PVCreate initialises devices as physical volumes (and, with a devices file, adds them to it).
func (r Runner) PVCreate(ctx context.Context, devices ...string) error {
	if _, err := r.LVMCmd(ctx, "pvcreate", devices...); err != nil {
		return fmt.Errorf("create physical volumes on %v: %w", devices, err)
	}
	return nil
}

// VGCreate creates a volume group on devices with tags.
func (r Runner) VGCreate(ctx context.Context, vg string, tags []string, devices []string) error {
	args := make([]string, 0, 2*len(tags)+1+len(devices))
	for _, t := range tags {
		args = append(args, "--addtag", t)
	}
	args = append(args, vg)
	args = append(args, devices...)
	if _, err := r.LVMCmd(ctx, "vgcreate", args...); err != nil {
		return fmt.Errorf("create volume group %s on %v: %w", vg, devices, err)
	}
	return nil
}

// VGExtend adds devices to a volume group.
func (r Runner) VGExtend(ctx context.Context, vg string, devices []string) error {
	if _, err := r.LVMCmd(ctx, "vgextend", append([]string{vg}, devices...)...); err != nil {
		return fmt.Errorf("add %v to volume group %s: %w", devices, vg, err)
	}
	return nil
}

// VGReduce removes an empty physical volume from a volume group.
func (r Runner) VGReduce(ctx context.Context, vg, device string) error {
	if _, err := r.LVMCmd(ctx, "vgreduce", vg, device); err != nil {
		return fmt.Errorf("remove %s from volume group %s: %w", device, vg, err)
	}
	return nil
}

// PVRemove removes the LVM label from devices (and, with a devices file, the devices from it).
func (r Runner) PVRemove(ctx context.Context, devices ...string) error {
	if _, err := r.LVMCmd(ctx, "pvremove", append([]string{"-y"}, devices...)...); err != nil {
		return fmt.Errorf("remove the LVM label from %v: %w", devices, err)
	}
	return nil
}

// VGRemove removes an empty volume group.
func (r Runner) VGRemove(ctx context.Context, vg string) error {
	if _, err := r.LVMCmd(ctx, "vgremove", vg); err != nil {
		return fmt.Errorf("remove volume group %s: %w", vg, err)
	}
	return nil
}

// ThinPool describes a thin pool to create.
type ThinPool struct {
	VG   string
	Name string
	// Extents of pool data.
	Extents uint64
	// ChunkSize in bytes; 0 lets lvm2 choose.
	ChunkSize uint64
	// MetadataSize in bytes; 0 lets lvm2 choose.
	MetadataSize uint64
	// Tags added to the pool LV.
	Tags []string
}

// CreateThinPoolArgs are the lvcreate arguments for p. Zeroing of new blocks is always on (-Z y): a thin
// volume must never show another volume's old data.
func CreateThinPoolArgs(p ThinPool) []string {
	args := []string{"--type", "thin-pool", "-l", strconv.FormatUint(p.Extents, 10), "-Z", "y"}
	if p.ChunkSize > 0 {
		args = append(args, "--chunksize", strconv.FormatUint(p.ChunkSize, 10)+"b")
	}
	if p.MetadataSize > 0 {
		args = append(args, "--poolmetadatasize", strconv.FormatUint(p.MetadataSize, 10)+"b")
	}
	for _, t := range p.Tags {
		args = append(args, "--addtag", t)
	}
	return append(args, "-n", p.Name, p.VG)
}

// CreateThinPool creates a thin pool.
func (r Runner) CreateThinPool(ctx context.Context, p ThinPool) error {
	if _, err := r.LVMCmd(ctx, "lvcreate", CreateThinPoolArgs(p)...); err != nil {
		return fmt.Errorf("create thin pool %s/%s: %w", p.VG, p.Name, err)
	}
	// A full pool then fails writes at once instead of queueing them (60 s by default) and hanging every
	// application on the pool. lvcreate does not take the option for thin pools; lvchange does.
	if _, err := r.LVMCmd(ctx, "lvchange", "--errorwhenfull", "y", p.VG+"/"+p.Name); err != nil {
		return fmt.Errorf("make thin pool %s/%s fail writes when full: %w", p.VG, p.Name, err)
	}
	return nil
}

// ExtendLV grows an LV (a thin pool's data) to extents.
func (r Runner) ExtendLV(ctx context.Context, vg, lv string, extents uint64) error {
	if _, err := r.LVMCmd(ctx, "lvextend", "-l", strconv.FormatUint(extents, 10), vg+"/"+lv); err != nil {
		return fmt.Errorf("extend %s/%s to %d extents: %w", vg, lv, extents, err)
	}
	return nil
}

// ExtendPoolMetadata grows a thin pool's metadata to size bytes.
func (r Runner) ExtendPoolMetadata(ctx context.Context, vg, pool string, size uint64) error {
	if _, err := r.LVMCmd(ctx, "lvextend", "--poolmetadatasize", strconv.FormatUint(size, 10)+"b", vg+"/"+pool); err != nil {
		return fmt.Errorf("extend the metadata of thin pool %s/%s to %d bytes: %w", vg, pool, size, err)
	}
	return nil
}

// ActivateLV activates an LV.
func (r Runner) ActivateLV(ctx context.Context, vg, lv string) error {
	if _, err := r.LVMCmd(ctx, "lvchange", "-ay", vg+"/"+lv); err != nil {
		return fmt.Errorf("activate %s/%s: %w", vg, lv, err)
	}
	return nil
}

// RemoveLV removes an LV by name, active or not, without any ownership check: volumes go through
// RemoveVolume; the volume group reconciler uses RemoveLV for the thin pools it checked against the report.
func (r Runner) RemoveLV(ctx context.Context, vg, lv string) error {
	if _, err := r.LVMCmd(ctx, "lvremove", "-y", vg+"/"+lv); err != nil {
		return fmt.Errorf("remove %s/%s: %w", vg, lv, err)
	}
	return nil
}

// CreateLV creates a linear LV of size bytes (tests and the CSI path use it; the agent itself only creates
// thin pools).
func (r Runner) CreateLV(ctx context.Context, vg, lv string, size uint64) error {
	if _, err := r.LVMCmd(ctx, "lvcreate", "-y", "-W", "y", "-L", strconv.FormatUint(size, 10)+"b", "-n", lv, vg); err != nil {
		return fmt.Errorf("create %s/%s: %w", vg, lv, err)
	}
	return nil
}

// CreateThinLV creates a thin volume of virtual size bytes in a pool.
func (r Runner) CreateThinLV(ctx context.Context, vg, pool, lv string, size uint64) error {
	if _, err := r.LVMCmd(ctx, "lvcreate", "-y", "-T", vg+"/"+pool, "-V", strconv.FormatUint(size, 10)+"b", "-n", lv); err != nil {
		return fmt.Errorf("create thin volume %s/%s in pool %s: %w", vg, lv, pool, err)
	}
	return nil
}
