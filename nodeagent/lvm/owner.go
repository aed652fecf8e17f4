package lvm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
)

// VolumeTag is the LVM tag on every volume the lvmd service creates (thick LVs, thin volumes, snapshots
// and clones), whichever client asked for it. Only volumes with this tag, or named by TopoLVM's rule (see
// IsTopoLVMName), are ever removed.
const VolumeTag = "lvms-volume"

// topoLVMName is TopoLVM's naming rule for the LVs it creates: the LV is named after its LogicalVolume's
// metadata.uid, a lowercase UUID. TopoLVM puts no tag on them, so the name is the only mark they carry.
var topoLVMName = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// IsTopoLVMName reports whether name follows TopoLVM's (and LVMS's) LV naming rule.
func IsTopoLVMName(name string) bool { return topoLVMName.MatchString(name) }

// RemovalRefusedError is a volume removal the agent refuses because the LV is not a volume LVMS or
// TopoLVM created.
type RemovalRefusedError struct {
	// LV is vg/name.
	LV string
	// Reason says why, and how to proceed.
	Reason string
	// NotAVolume is true for LVs that are no volume at all (thin pools, lvm2's internal LVs), false for
	// volumes someone else created.
	NotAVolume bool
}

func (e *RemovalRefusedError) Error() string {
	return fmt.Sprintf("refusing to remove logical volume %s: %s", e.LV, e.Reason)
}

// AsRemovalRefused returns the *RemovalRefusedError in err's chain.
func AsRemovalRefused(err error) (*RemovalRefusedError, bool) {
	var re *RemovalRefusedError
	ok := errors.As(err, &re)
	return re, ok
}

// CheckVolumeRemoval returns a *RemovalRefusedError unless lv is a volume LVMS created (VolumeTag) or one
// TopoLVM created (named after a LogicalVolume uid). Thin pools and lvm2's internal LVs are never
// volumes, whatever their tags or names.
func CheckVolumeRemoval(lv LV) error {
	full := lv.VGName + "/" + lv.Name
	switch {
	case lv.IsThinPool():
		return &RemovalRefusedError{LV: full, NotAVolume: true,
			Reason: "it is a thin pool, not a volume; a pool is removed only with its volume group"}
	case lv.IsPrivate():
		return &RemovalRefusedError{LV: full, NotAVolume: true, Reason: "it is an internal LV of lvm2, not a volume"}
	case slices.Contains(lv.Tags, VolumeTag), IsTopoLVMName(lv.Name):
		return nil
	}
	return &RemovalRefusedError{LV: full, Reason: fmt.Sprintf(
		"it has no %q tag and its name is not a LogicalVolume uid, so neither LVMS nor TopoLVM created it; if it must go, remove it by hand with lvremove",
		VolumeTag)}
}

// RemoveVolume removes a volume (lv as the current report shows it) after CheckVolumeRemoval allowed it.
func (r Runner) RemoveVolume(ctx context.Context, lv LV) error {
	if err := CheckVolumeRemoval(lv); err != nil {
		return err
	}
	return r.RemoveLV(ctx, lv.VGName, lv.Name)
}
