package lockspace

import (
	"context"
	"encoding/json"
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

// LV is an LV of a shared volume group as this node sees it.
type LV struct {
	Size uint64
	// Active is this node's activation ("" when inactive here; other nodes' are not visible).
	Active Activation
}

// ErrNoLV is an LV that does not exist.
var ErrNoLV = errors.New("no such logical volume")

// lvsJSON is the part of `lvs --reportformat json` read here.
type lvsJSON struct {
	Report []struct {
		LV []struct {
			Name        string `json:"lv_name"`
			Size        string `json:"lv_size"`
			Locally     string `json:"lv_active_locally"`
			Exclusively string `json:"lv_active_exclusively"`
		} `json:"lv"`
	} `json:"report"`
}

// LVs lists the LVs of shared volume group vg (hidden ones such as lvmlock left out) with this node's
// activation of each.
func (l LVM) LVs(ctx context.Context, vg string) (map[string]LV, error) {
	out, err := l.cmd(ctx, "lvs", "--reportformat", "json", "--binary", "--units", "b", "--nosuffix",
		"-o", "lv_name,lv_size,lv_active_locally,lv_active_exclusively", vg)
	if err != nil {
		return nil, fmt.Errorf("list the LVs of shared volume group %s: %w", vg, err)
	}
	return parseLVs(out)
}

func parseLVs(out []byte) (map[string]LV, error) {
	var rep lvsJSON
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("read lvs' report: %w", err)
	}
	lvs := map[string]LV{}
	for _, r := range rep.Report {
		for _, lv := range r.LV {
			if lv.Name == "" || strings.HasPrefix(lv.Name, "[") {
				continue
			}
			size, err := strconv.ParseUint(lv.Size, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("read lvs' report: size %q of %s: %w", lv.Size, lv.Name, err)
			}
			x := LV{Size: size}
			switch {
			case !yes(lv.Locally):
			case yes(lv.Exclusively):
				x.Active = Exclusive
			default:
				x.Active = Shared
			}
			lvs[lv.Name] = x
		}
	}
	return lvs, nil
}

// yes reads a binary field of lvs: 1 with --binary, the field's name ("active locally") without.
func yes(v string) bool { return v == "1" || strings.HasPrefix(v, "active") }

// Lookup returns one LV of vg, or ErrNoLV.
func (l LVM) Lookup(ctx context.Context, vg, lv string) (LV, error) {
	lvs, err := l.LVs(ctx, vg)
	if err != nil {
		return LV{}, err
	}
	x, ok := lvs[lv]
	if !ok {
		return LV{}, fmt.Errorf("%s/%s: %w", vg, lv, ErrNoLV)
	}
	return x, nil
}

// DevicePath is where an active LV's device is on a node.
func DevicePath(vg, lv string) string { return "/dev/" + vg + "/" + lv }
