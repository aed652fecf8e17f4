package components

import (
	"slices"
	"strconv"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/explain"
)

// LockModeHealth colours the lock managers' mode: an error when they do not run though a shared volume group
// needs them, merely informative when nothing needs them any more.
func LockModeHealth(sl *console.SharedLockingView) console.Health {
	switch {
	case slices.ContainsFunc(sl.Findings, func(d console.Difference) bool { return d.Explanation.Code == explain.TopicLockManagersNotRunning }):
		return console.HealthError
	case sl.Mode == "NotRunning":
		return console.HealthInfo
	}
	return console.HealthOK
}

// HostIDText is a sanlock host ID, or says there is none yet.
func HostIDText(id int32) string {
	if id <= 0 {
		return "none yet"
	}
	return strconv.Itoa(int(id))
}

// WatchdogText says whether sanlock uses a watchdog.
func WatchdogText(on bool) string {
	if on {
		return "yes"
	}
	return "none"
}

// LockspaceText says whether the node is in a shared volume group's lockspace.
func LockspaceText(s string) string {
	switch s {
	case "Joined":
		return "joined"
	case "NotJoined":
		return "not joined"
	}
	return s
}

// LockspaceHealth colours a lockspace state: out of it, the volume group cannot be used on the node; an error
// when the agent cannot go on by itself (the volume group Failed).
func LockspaceHealth(g console.VolumeGroupView) console.Health {
	switch {
	case g.Lockspace == "Joined":
		return console.HealthOK
	case StateHealth(g.State) == console.HealthError:
		return console.HealthError
	}
	return console.HealthWarning
}

// GroupMemberMissingHealth colours a group member without a LogicalVolume: expected while the group is
// pending or after it failed (its members are removed), a problem when the group says it is ready.
func GroupMemberMissingHealth(g console.GroupSnapshotView) console.Health {
	if g.Phase == "Ready" {
		return console.HealthError
	}
	return console.HealthInfo
}

// GroupNoticeClass styles a group snapshot's message: an error box for a failed group, a warning otherwise.
func GroupNoticeClass(g console.GroupSnapshotView) string {
	if g.Health == console.HealthError {
		return "notice error"
	}
	return "notice"
}
