package groupsnapshot

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// MaxMembers bounds a group: every member is suspended at once, and each takes one lvcreate while the
// others wait.
const MaxMembers = 32

// Member is one volume of a group: its thin origin and the name of the snapshot to take of it.
type Member struct {
	// VG is the member's volume group; every member of a group must name the same one.
	VG string `json:"vg"`
	// Origin is the thin volume's LV name.
	Origin string `json:"origin"`
	// Snapshot is the LV name of the snapshot to create.
	Snapshot string `json:"snapshot"`
}

// Request is a group snapshot to take.
type Request struct {
	// ID names the group (its state file and the tag on its snapshots): lowercase letters, digits, '-'
	// and '.', at most 63 characters, for example a VolumeGroupSnapshotContent's UID.
	ID string `json:"id"`
	// Members, at least one and at most MaxMembers; they are suspended and snapshotted in Origin order,
	// whatever their order here.
	Members []Member `json:"members"`
	// Tags are added to every snapshot, besides lvm.VolumeTag and the group's tag.
	Tags []string `json:"tags,omitempty"`
}

// GroupTag is the LVM tag on every snapshot of group id. Only snapshots carrying it are removed when a
// group fails.
func GroupTag(id string) string { return "lvms-group=" + id }

var (
	idRE  = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)
	lvRE  = regexp.MustCompile(`^[A-Za-z0-9+_.][A-Za-z0-9+_.-]{0,126}$`)
	tagRE = regexp.MustCompile(`^[A-Za-z0-9_+.\-/=!:&#]{1,128}$`)
)

// validName reports whether s is a name lvm2 accepts for a VG or an LV and that cannot be read as an
// option or a path.
func validName(s string) bool {
	return lvRE.MatchString(s) && s != "." && s != ".." && !strings.HasPrefix(s, "snapshot") && !strings.HasPrefix(s, "pvmove")
}

// check validates the request's shape, without looking at the volume group; it returns the members
// sorted by origin (the caller's slice is not changed).
func (r Request) check() ([]Member, error) {
	if !idRE.MatchString(r.ID) {
		return nil, refuse(ReasonInvalid, "group ID %q is not 1-63 lowercase letters, digits, '-' or '.' (starting and ending with a letter or digit)", r.ID)
	}
	if len(r.Members) == 0 {
		return nil, refuse(ReasonInvalid, "group %s has no members", r.ID)
	}
	if len(r.Members) > MaxMembers {
		return nil, refuse(ReasonInvalid, "group %s has %d members, at most %d can be suspended together; split it", r.ID, len(r.Members), MaxMembers)
	}
	for _, t := range r.Tags {
		if !tagRE.MatchString(t) {
			return nil, refuse(ReasonInvalid, "tag %q is not a valid LVM tag (letters, digits and _+.-/=!:&#)", t)
		}
		if strings.HasPrefix(t, "lvms-group=") || t == lvm.VolumeTag {
			return nil, refuse(ReasonInvalid, "tag %q is LVMS's own; leave it out of the request", t)
		}
	}
	members := slices.Clone(r.Members)
	slices.SortFunc(members, func(a, b Member) int { return strings.Compare(a.Origin, b.Origin) })
	names := map[string]string{}
	for _, m := range members {
		for _, n := range []string{m.VG, m.Origin, m.Snapshot} {
			if !validName(n) {
				return nil, refuse(ReasonInvalid, "%q is not a valid volume group or logical volume name", n)
			}
		}
		if m.VG != members[0].VG {
			return nil, refuse(ReasonMixedVolumeGroups, "volumes %s/%s and %s/%s are in different volume groups; a group snapshot needs every volume in one volume group of one node",
				members[0].VG, members[0].Origin, m.VG, m.Origin)
		}
		for _, n := range []string{m.Origin, m.Snapshot} {
			if prev, ok := names[n]; ok {
				return nil, refuse(ReasonInvalid, "%s is named twice in group %s (as %s and again); each origin and snapshot must be a different LV", n, r.ID, prev)
			}
		}
		names[m.Origin], names[m.Snapshot] = "an origin", "a snapshot"
	}
	return members, nil
}

// checkAgainst refuses members that are not active thin volumes of one pool, or whose snapshot name is
// taken, as rep shows the volume group.
func checkAgainst(members []Member, rep *lvm.Report) error {
	vg := members[0].VG
	if _, ok := rep.VG(vg); !ok {
		return refuse(ReasonNotFound, "volume group %s not found on this node", vg)
	}
	pool := ""
	for _, m := range members {
		lv, ok := rep.LV(vg, m.Origin)
		switch {
		case !ok:
			return refuse(ReasonNotFound, "volume %s/%s not found on this node", vg, m.Origin)
		case !lv.IsThinVolume():
			return refuse(ReasonThickVolume, "volume %s/%s is not a thin volume (lv_attr %s); group snapshots need thin volumes of one thin pool", vg, m.Origin, lv.Attr)
		case len(lv.Attr) > 4 && lv.Attr[4] == 's':
			return refuse(ReasonBusy, "volume %s/%s is suspended already; another operation is in progress or was interrupted (resume it with `dmsetup resume %s`)", vg, m.Origin, DMName(vg, m.Origin))
		case !lv.Active():
			return refuse(ReasonInactive, "volume %s/%s is not active; only active volumes can be suspended together", vg, m.Origin)
		case pool != "" && lv.PoolLV != pool:
			return refuse(ReasonMixedPools, "volumes %s/%s (pool %s) and %s/%s (pool %s) are in different thin pools; a group snapshot needs one pool",
				vg, members[0].Origin, pool, vg, m.Origin, lv.PoolLV)
		}
		pool = lv.PoolLV
		if _, taken := rep.LV(vg, m.Snapshot); taken {
			return refuse(ReasonExists, "an LV named %s/%s exists already; choose another snapshot name", vg, m.Snapshot)
		}
	}
	return nil
}

// DMName is the device-mapper name lvm2 gives LV lv of volume group vg: the two joined by '-', with
// every '-' in either doubled.
func DMName(vg, lv string) string {
	return strings.ReplaceAll(vg, "-", "--") + "-" + strings.ReplaceAll(lv, "-", "--")
}

// Reason classifies a refusal, for events and for the CSI error code.
type Reason string

// Refusal reasons.
const (
	ReasonInvalid           Reason = "Invalid"
	ReasonNotFound          Reason = "NotFound"
	ReasonThickVolume       Reason = "ThickVolume"
	ReasonMixedVolumeGroups Reason = "MixedVolumeGroups"
	ReasonMixedPools        Reason = "MixedThinPools"
	ReasonInactive          Reason = "Inactive"
	ReasonBusy              Reason = "Busy"
	ReasonExists            Reason = "SnapshotExists"
)

// RefusedError is a group refused before anything was suspended.
type RefusedError struct {
	Reason  Reason
	Message string
}

func (e *RefusedError) Error() string { return "group snapshot refused: " + e.Message }

func refuse(reason Reason, format string, a ...any) error {
	return &RefusedError{Reason: reason, Message: fmt.Sprintf(format, a...)}
}
