package lockspace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockd"
)

// DefaultMetadataSize is the metadata area of a shared volume group's PVs. lvm2's default (about 1 MiB)
// runs out after a few hundred LVs, which a shared volume group serving many volumes reaches.
const DefaultMetadataSize = 64 << 20

// LVM runs lvm2 on shared volume groups as one node (its host ID).
type LVM struct {
	Runner lvm.Runner
	HostID int
}

func (l LVM) cmd(ctx context.Context, sub string, args ...string) ([]byte, error) {
	if l.HostID < 1 {
		return nil, errors.New("no host ID: claim one before touching a shared volume group")
	}
	return l.Runner.LVMCmd(ctx, sub, append(lockd.LVMConfig(l.HostID), args...)...)
}

// BlankError is a LUN that is not blank: a shared volume group is never created over data.
type BlankError struct {
	Device string
	Found  string
}

func (e *BlankError) Error() string {
	return fmt.Sprintf("%s is not blank (%s): LVMS creates a shared volume group only on a blank LUN; if its data is not needed, wipe it by hand from one node (wipefs --all %s), then LVMS creates the volume group", e.Device, e.Found, e.Device)
}

// CheckBlank refuses a device that carries any signature or partition, or is in use: the LUN every node
// sees must hold nothing yet (an LVM label without a volume group is refused too, as LVMS cannot tell
// whose it is).
func CheckBlank(d *blockdev.Device) error {
	switch {
	case d == nil:
		return errors.New("the device was not found on this node")
	case len(d.ForeignSignatures()) > 0:
		return &BlankError{Device: d.KName, Found: "signature " + strings.Join(d.ForeignSignatures(), ", ")}
	case d.HasSignature(blockdev.SigLVM2):
		return &BlankError{Device: d.KName, Found: "an LVM physical volume"}
	case d.Mounted():
		return &BlankError{Device: d.KName, Found: "mounted at " + strings.Join(d.MountPoints, ", ")}
	case len(d.Children) > 0:
		return &BlankError{Device: d.KName, Found: "partitions or holders"}
	}
	return nil
}

// Create creates shared volume group vg on devices, tagged as LVMS's, after checking each is blank. The
// first shared volume group created on a host set holds the global lock.
func (l LVM) Create(ctx context.Context, vg string, devices []*blockdev.Device, metadataSize uint64) error {
	if len(devices) == 0 {
		return fmt.Errorf("create shared volume group %s: no device", vg)
	}
	if metadataSize == 0 {
		metadataSize = DefaultMetadataSize
	}
	args := []string{"--shared", "--addtag", lvm.OwnerTag, "--metadatasize", strconv.FormatUint(metadataSize, 10) + "b", vg}
	for _, d := range devices {
		if err := CheckBlank(d); err != nil {
			return fmt.Errorf("create shared volume group %s: %w", vg, err)
		}
		args = append(args, d.KName)
	}
	if _, err := l.cmd(ctx, "vgcreate", args...); err != nil {
		return fmt.Errorf("create shared volume group %s: %w", vg, err)
	}
	return nil
}

// Start joins vg's lockspace (vgchange --lockstart, which waits until it is joined). The first attempts
// after lvmlockd starts often fail while sanlock acquires the host ID's delta lease: call it again.
func (l LVM) Start(ctx context.Context, vg string) error {
	if _, err := l.cmd(ctx, "vgchange", "--lockstart", vg); err != nil {
		return fmt.Errorf("join the lockspace of shared volume group %s: %w", vg, err)
	}
	return nil
}

// Stop leaves vg's lockspace; every LV of vg must be inactive on this node.
func (l LVM) Stop(ctx context.Context, vg string) error {
	if _, err := l.cmd(ctx, "vgchange", "--lockstop", vg); err != nil {
		return fmt.Errorf("leave the lockspace of shared volume group %s: %w", vg, err)
	}
	return nil
}

// AddDevice puts a LUN into the agent's devices file, so that lvm2 on this node sees the shared volume
// group another node created on it (vgcreate adds it only on the creating node).
func AddDevice(ctx context.Context, r lvm.Runner, path string) error {
	if r.DevicesFile == "" {
		return nil // no devices file: lvm2 sees every device
	}
	if _, err := r.LVMCmd(ctx, "lvmdevices", "--adddev", path); err != nil {
		var ce *lvm.CommandError
		if errors.As(err, &ce) && strings.Contains(ce.Stderr, "already") {
			return nil
		}
		return fmt.Errorf("add %s to the devices file %s: %w", path, r.DevicesFile, err)
	}
	return nil
}

// Started lists the shared volume groups whose lockspace this node has joined: listed by lvmlockd
// (lvmlockctl --info) and, for sanlock ones, held by sanlock without a pending ADD or REM. lvmlockd keeps
// listing a lockspace whose start failed for a while, and one being added is not usable yet: a node that
// took either for joined would report Ready and then fail every lock ("Cannot access VG ... due to failed
// lock").
func (l LVM) Started(ctx context.Context) ([]string, error) {
	out, err := lockd.Info(ctx, l.Runner)
	if err != nil {
		return nil, fmt.Errorf("ask lvmlockd which lockspaces are joined: %w", err)
	}
	listed := parseInfo(string(out))
	var sanlock map[string]string
	var vgs []string
	for _, ls := range listed {
		if ls.Type == "sanlock" {
			if sanlock == nil {
				if sanlock, err = lockd.SanlockLockspaces(ctx, l.Runner); err != nil {
					return nil, fmt.Errorf("ask sanlock which lockspaces are joined: %w", err)
				}
			}
			if state, ok := sanlock[ls.Name]; !ok || state != lockd.LockspaceJoined {
				continue
			}
		}
		vgs = append(vgs, ls.VG)
	}
	return vgs, nil
}

// GlobalLock returns the joined shared volume group whose lockspace carries lvm2's global lock ("" when
// none of the joined ones does), from lvmlockctl --info.
func (l LVM) GlobalLock(ctx context.Context) (string, error) {
	out, err := lockd.Info(ctx, l.Runner)
	if err != nil {
		return "", fmt.Errorf("ask lvmlockd where the global lock is: %w", err)
	}
	return parseGlobalLock(string(out)), nil
}

// MoveGlobalLock moves lvm2's global lock from shared volume group from to to (both joined here): the
// first shared volume group carries it, and removing or abandoning that one without moving it leaves the
// others without a global lock (no new shared volume group, no PV changes) until someone enables it again.
//
// lvmlockd enables it in one lockspace only once it is disabled in the other: a failed enable puts it back.
func (l LVM) MoveGlobalLock(ctx context.Context, from, to string) error {
	if _, err := lockd.Ctl(ctx, l.Runner, "--gl-disable", from); err != nil {
		return fmt.Errorf("move the global lock from shared volume group %s to %s: %w", from, to, err)
	}
	if _, err := lockd.Ctl(ctx, l.Runner, "--gl-enable", to); err != nil {
		if _, back := lockd.Ctl(ctx, l.Runner, "--gl-enable", from); back != nil {
			return fmt.Errorf("move the global lock from shared volume group %s to %s: %w; and enabling it again in %s failed: %v (run lvmlockctl --gl-enable %s)", from, to, err, from, back, from)
		}
		return fmt.Errorf("move the global lock from shared volume group %s to %s (it stays in %s): %w", from, to, from, err)
	}
	return nil
}

// parseGlobalLock reads the lockspace whose section of `lvmlockctl --info` lists the global lock ("LK GL").
func parseGlobalLock(out string) string {
	vg := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "VG" && strings.HasPrefix(f[2], "lock_type="):
			vg = f[1]
		case len(f) >= 2 && f[0] == "LK" && f[1] == "GL" && vg != "":
			return vg
		}
	}
	return ""
}

// listedLockspace is one lockspace of `lvmlockctl --info`.
type listedLockspace struct {
	VG, Type, Name string
}

// parseInfo reads the lockspaces of `lvmlockctl --info`, which prints one "VG <name> lock_type=<type> <uuid>"
// line per lockspace lvmlockd knows, each followed by its "LS <type> <lockspace name>" and "LK" lines.
func parseInfo(out string) []listedLockspace {
	var spaces []listedLockspace
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "VG" && strings.HasPrefix(f[2], "lock_type="):
			spaces = append(spaces, listedLockspace{VG: f[1], Type: strings.TrimPrefix(f[2], "lock_type="), Name: "lvm_" + f[1]})
		case len(f) >= 3 && f[0] == "LS" && len(spaces) > 0:
			spaces[len(spaces)-1].Name = f[2]
		}
	}
	return spaces
}

// Exists reports whether this node sees shared volume group vg (its LUN must be in the devices file).
func (l LVM) Exists(ctx context.Context, vg string) (bool, error) {
	out, err := l.cmd(ctx, "vgs", "--noheadings", "-o", "vg_name", vg)
	var ce *lvm.CommandError
	switch {
	case err == nil:
		return strings.TrimSpace(string(out)) == vg, nil
	case errors.As(err, &ce) && strings.Contains(ce.Stderr, "not found"):
		return false, nil
	}
	return false, fmt.Errorf("look for shared volume group %s: %w", vg, err)
}

// Space returns the size and free bytes of shared volume group vg as this node reads its metadata.
func (l LVM) Space(ctx context.Context, vg string) (size, free uint64, err error) {
	out, err := l.cmd(ctx, "vgs", "--noheadings", "--units", "b", "--nosuffix", "-o", "vg_size,vg_free", vg)
	if err != nil {
		return 0, 0, fmt.Errorf("read the size of shared volume group %s: %w", vg, err)
	}
	return parseSpace(string(out))
}

func parseSpace(out string) (size, free uint64, err error) {
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("read vgs' size and free space: %q is not two numbers", strings.TrimSpace(out))
	}
	if size, err = strconv.ParseUint(f[0], 10, 64); err == nil {
		free, err = strconv.ParseUint(f[1], 10, 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read vgs' size and free space %q: %w", strings.TrimSpace(out), err)
	}
	return size, free, nil
}
