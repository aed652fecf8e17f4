package tui

import (
	"strconv"
	"strings"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/words"
)

// sharedItems are the node screen's rows for shared volume groups: the lock managers, then each shared
// volume group's lockspace. A node without shared volume groups has none.
func sharedItems(v *console.NodeView) []item {
	var out []item
	if sl := v.SharedLocking; sl != nil {
		it := item{cols: []string{"shared locking", console.LockModeText(sl.Mode)}, health: sl.Health, differs: len(sl.Findings) > 0}
		hostID := "none yet"
		if sl.HostID > 0 {
			hostID = strconv.Itoa(int(sl.HostID))
		}
		if len(sl.HostIDAlsoOn) > 0 {
			hostID = "≠ " + hostID + ", also reported by " + strings.Join(sl.HostIDAlsoOn, ", ")
		}
		watchdog := "none"
		if sl.Watchdog {
			watchdog = "yes"
		}
		it.detail = []string{"Lock managers (sanlock, lvmlockd) on " + v.Name + ": " + console.LockModeText(sl.Mode), "Host ID: " + hostID, "Watchdog: " + watchdog}
		if sl.Fencing != "" {
			fencing := "Fencing: " + sl.Fencing
			if !sl.Watchdog {
				fencing = "WARNING: " + sl.Fencing
			}
			it.detail = append(it.detail, fencing)
		}
		if sl.Message != "" {
			it.detail = append(it.detail, "Agent: \""+sl.Message+"\"")
		}
		it.detail = append(it.detail, "")
		for _, f := range sl.Findings {
			it.detail = append(it.detail, explanationText(f.Explanation)...)
		}
		out = append(out, it)
	}
	for _, g := range v.VolumeGroups {
		if g.Lockspace == "" {
			continue
		}
		it := item{cols: []string{g.Name + " lockspace", lockspaceText(g.Lockspace)}, health: lockspaceHealth(g), differs: g.Topic != nil}
		by := g.InitializedBy
		if by == "" {
			by = "not known yet"
		}
		it.detail = []string{"Shared volume group " + g.Name + ": " + g.State + ", lockspace " + lockspaceText(g.Lockspace), "Initialized by: " + by}
		it.detail = append(it.detail, activeVolumesText(g.ActiveVolumes)...)
		if g.Message != "" {
			it.detail = append(it.detail, "Agent: \""+g.Message+"\"")
		}
		it.detail = append(it.detail, "")
		if g.Topic != nil {
			it.detail = append(it.detail, explanationText(*g.Topic)...)
		}
		out = append(out, it)
	}
	return out
}

func lockspaceText(s string) string {
	if s == "NotJoined" {
		return "not joined"
	}
	return strings.ToLower(s)
}

// lockspaceHealth: out of its lockspace a volume group cannot be used on the node; an error when the agent
// cannot go on by itself (the volume group Failed).
func lockspaceHealth(g console.VolumeGroupView) console.Health {
	switch {
	case g.Lockspace == "Joined":
		return console.HealthOK
	case g.Health == console.HealthError:
		return console.HealthError
	}
	return console.HealthWarning
}

// activeVolumesText lists the volumes of a shared volume group active on the node, one a line, by their
// LogicalVolume (the LV name when there is none) with the mode and the LV name.
func activeVolumesText(as []console.ActiveVolume) []string {
	if len(as) == 0 {
		return []string{"Volumes active on this node: none"}
	}
	out := []string{"Volumes active on this node:"}
	for _, a := range as {
		line := "  " + a.Name + " (" + a.Mode + ")"
		if a.LogicalVolume != "" {
			line = "  " + a.LogicalVolume + " (" + a.Mode + "), LV " + a.Name
		}
		out = append(out, line)
	}
	return out
}

// sharedVolumeCol is the volumes list's second column for a volume of the shared driver, which has no node:
// where it is active, in a few words (the detail pane lists the nodes).
func sharedVolumeCol(v console.VolumeView) string {
	switch len(v.ActiveOn) {
	case 0:
		return "shared, not active"
	case 1:
		return "shared, on " + v.ActiveOn[0].Node
	}
	return "shared, on " + words.Count(len(v.ActiveOn), "node", "nodes")
}
