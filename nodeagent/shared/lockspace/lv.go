package lockspace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// Activation is how a node activates an LV of a shared volume group.
type Activation string

// Activations. lvmlockd holds the LV's lock while it is active: ex (one node) or sh (several nodes).
const (
	// Exclusive (-aey): ReadWriteOnce; no other node can activate it meanwhile.
	Exclusive Activation = "ey"
	// Shared (-asy): ReadWriteMany raw block, for VM live migration; other nodes may activate it shared
	// too, none exclusively.
	Shared Activation = "sy"
)

// LockedError is an activation or removal refused because another node holds the LV's lock.
type LockedError struct {
	VG, LV string
	Op     string
	Stderr string
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%s %s/%s: another node holds it (%s): it must be released there first (unstage its volume)", e.Op, e.VG, e.LV, e.Stderr)
}

// wrap names the operation in err, or turns lvm2's "locked by other host" refusal into a *LockedError
// (which names it itself).
func wrap(err error, op, vg, lv string) error {
	var ce *lvm.CommandError
	if errors.As(err, &ce) && (strings.Contains(ce.Stderr, "locked by other host") || strings.Contains(ce.Stderr, "lock is held by")) {
		return &LockedError{VG: vg, LV: lv, Op: op, Stderr: ce.Stderr}
	}
	return fmt.Errorf("%s %s/%s: %w", op, vg, lv, err)
}

// CreateLV creates a linear LV of size bytes on shared volume group vg, inactive: nodes activate it when
// they stage it.
func (l LVM) CreateLV(ctx context.Context, vg, lv string, size uint64, tags ...string) error {
	args := []string{"--activate", "n", "--type", "linear", "-L", strconv.FormatUint(size, 10) + "b", "-n", lv}
	for _, t := range tags {
		args = append(args, "--addtag", t)
	}
	if _, err := l.cmd(ctx, "lvcreate", append(args, vg)...); err != nil {
		return wrap(err, "create LV", vg, lv)
	}
	return nil
}

// Activate activates the LV on this node, exclusively or shared. Another node's conflicting lock is a
// *LockedError.
func (l LVM) Activate(ctx context.Context, vg, lv string, how Activation) error {
	if how != Exclusive && how != Shared {
		return fmt.Errorf("activate %s/%s: unknown activation %q", vg, lv, how)
	}
	if _, err := l.cmd(ctx, "lvchange", "-a"+string(how), vg+"/"+lv); err != nil {
		return wrap(err, "activate ("+string(how)+")", vg, lv)
	}
	return nil
}

// Deactivate deactivates the LV on this node and releases its lock.
func (l LVM) Deactivate(ctx context.Context, vg, lv string) error {
	if _, err := l.cmd(ctx, "lvchange", "-an", vg+"/"+lv); err != nil {
		return wrap(err, "deactivate", vg, lv)
	}
	return nil
}

// RemoveLV removes the LV. lvmlockd refuses while any node has it active (a *LockedError): a volume is
// deleted only when it is inactive everywhere.
func (l LVM) RemoveLV(ctx context.Context, vg, lv string) error {
	if _, err := l.cmd(ctx, "lvremove", "-y", vg+"/"+lv); err != nil {
		return wrap(err, "remove", vg, lv)
	}
	return nil
}

// ExtendLV grows the LV to size bytes; shared LVs grow offline (inactive everywhere).
func (l LVM) ExtendLV(ctx context.Context, vg, lv string, size uint64) error {
	if _, err := l.cmd(ctx, "lvextend", "-L", strconv.FormatUint(size, 10)+"b", vg+"/"+lv); err != nil {
		return wrap(err, "extend", vg, lv)
	}
	return nil
}
