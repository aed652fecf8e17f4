package lvm

import (
	"context"
	"fmt"
	"strconv"
)

// VolumeSpec describes a volume the CSI path creates: a linear (thick) LV in VG, or a thin volume in
// VG/Pool when Pool is set.
type VolumeSpec struct {
	VG   string
	Pool string
	Name string
	// Size in bytes (the virtual size of a thin volume).
	Size uint64
	Tags []string
	// Stripes and StripeSize (an lvm2 size such as "64k") stripe a thick LV; zero values leave it linear.
	Stripes    uint
	StripeSize string
	// Options are extra lvcreate arguments, appended verbatim (lvmd.yaml lvcreate-options).
	Options []string
}

// CreateVolumeArgs are the lvcreate arguments for v. New LVs are created with -W y (wipe signatures) so
// a volume never looks like it carries an old file system.
func CreateVolumeArgs(v VolumeSpec) []string {
	size := strconv.FormatUint(v.Size, 10) + "b"
	var args []string
	if v.Pool != "" {
		args = []string{"-T", v.VG + "/" + v.Pool, "-n", v.Name, "-V", size, "-W", "y", "-y"}
	} else {
		args = []string{"-n", v.Name, "-L", size, "-W", "y", "-y"}
	}
	for _, t := range v.Tags {
		args = append(args, "--addtag", t)
	}
	if v.Stripes > 0 {
		args = append(args, "-i", strconv.FormatUint(uint64(v.Stripes), 10))
		if v.StripeSize != "" {
			args = append(args, "-I", v.StripeSize)
		}
	}
	args = append(args, v.Options...)
	if v.Pool == "" {
		args = append(args, v.VG)
	}
	return args
}

// CreateVolume creates a thick LV or a thin volume.
func (r Runner) CreateVolume(ctx context.Context, v VolumeSpec) error {
	if _, err := r.LVMCmd(ctx, "lvcreate", CreateVolumeArgs(v)...); err != nil {
		return fmt.Errorf("create volume %s/%s: %w", v.VG, v.Name, err)
	}
	return nil
}

// ResizeLV sets an LV's size to size bytes (without resizing a file system on it).
func (r Runner) ResizeLV(ctx context.Context, vg, lv string, size uint64) error {
	if _, err := r.LVMCmd(ctx, "lvresize", "-L", strconv.FormatUint(size, 10)+"b", vg+"/"+lv); err != nil {
		return fmt.Errorf("resize %s/%s to %d bytes: %w", vg, lv, size, err)
	}
	return nil
}

// CreateThinSnapshot creates a thin snapshot name of the thin volume vg/source. It is created without the
// activation-skip flag (-k n), so it can be activated like any other volume.
func (r Runner) CreateThinSnapshot(ctx context.Context, vg, source, name string, tags []string) error {
	args := []string{"-s", "-k", "n", "-n", name, vg + "/" + source}
	for _, t := range tags {
		args = append(args, "--addtag", t)
	}
	if _, err := r.LVMCmd(ctx, "lvcreate", args...); err != nil {
		return fmt.Errorf("create thin snapshot %s/%s of %s: %w", vg, name, source, err)
	}
	return nil
}

// SetReadOnly makes an LV read-only (lvchange -p r).
func (r Runner) SetReadOnly(ctx context.Context, vg, lv string) error {
	if _, err := r.LVMCmd(ctx, "lvchange", "-p", "r", vg+"/"+lv); err != nil {
		return fmt.Errorf("make %s/%s read-only: %w", vg, lv, err)
	}
	return nil
}

// ActivateWritable clears the activation-skip flag of an LV and activates it (lvchange -k n -a y).
func (r Runner) ActivateWritable(ctx context.Context, vg, lv string) error {
	if _, err := r.LVMCmd(ctx, "lvchange", "-k", "n", "-a", "y", vg+"/"+lv); err != nil {
		return fmt.Errorf("activate %s/%s: %w", vg, lv, err)
	}
	return nil
}
