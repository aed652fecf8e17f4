package console

import (
	"slices"
	"strconv"
	"strings"
	"time"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// GroupSnapshotView is a LogicalVolumeGroupSnapshot with its member snapshots.
type GroupSnapshotView struct {
	Name string `json:"name"`
	Node string `json:"node"`
	// DeviceClass is the spec's ("" for the node's default device class).
	DeviceClass string `json:"deviceClass,omitempty"`
	// VolumeGroupSnapshot is "namespace/name" of the VolumeGroupSnapshot the group was taken for, when the
	// group records it; empty otherwise.
	VolumeGroupSnapshot string `json:"volumeGroupSnapshot,omitempty"`
	// Phase is Pending, Ready, Refused or Failed (an empty status phase is Pending).
	Phase   string `json:"phase"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// SuspendTime is how long the origins were suspended together; nil when nothing was suspended.
	SuspendTime *time.Duration `json:"suspendTime,omitempty"`
	Created     time.Time      `json:"created,omitzero"`
	Members     []GroupMember  `json:"members"`
	Health      Health         `json:"health"`
}

// MembersReady counts the members whose snapshot is ready.
func (g GroupSnapshotView) MembersReady() int {
	n := 0
	for _, m := range g.Members {
		if m.Ready {
			n++
		}
	}
	return n
}

// MembersText counts the members and the ready ones: "2 members, 1 ready".
func (g GroupSnapshotView) MembersText() string {
	word := " members, "
	if len(g.Members) == 1 {
		word = " member, "
	}
	return strconv.Itoa(len(g.Members)) + word + strconv.Itoa(g.MembersReady()) + " ready"
}

// SuspendText is the suspend time in words ("" when nothing was suspended).
func (g GroupSnapshotView) SuspendText() string {
	if g.SuspendTime == nil {
		return ""
	}
	return g.SuspendTime.String()
}

// GroupMember is one member of a group snapshot: its snapshot LogicalVolume and the volume it snapshots.
type GroupMember struct {
	// Snapshot is the snapshot LogicalVolume's name.
	Snapshot string `json:"snapshot"`
	// Source is the LogicalVolume it snapshots; SourcePVC the claim ("namespace/name") bound to that
	// volume's PersistentVolume, when there is one.
	Source    string `json:"source"`
	SourcePVC string `json:"sourcePVC,omitempty"`
	// Size is the snapshot LogicalVolume's size; nil when the LogicalVolume does not exist (yet).
	Size *Bytes `json:"size,omitempty"`
	// Exists is false for a member the spec names whose LogicalVolume is not in the snapshot.
	Exists bool `json:"exists"`
	// Ready is true when the snapshot LogicalVolume has a volume ID and no error.
	Ready bool `json:"ready"`
	// Message is the snapshot LogicalVolume's status message.
	Message string `json:"message,omitempty"`
	// Listed is false for a LogicalVolume labelled as the group's member that the group's spec does not name.
	Listed bool `json:"listed"`
}

// GroupSnapshotHealth maps a group snapshot phase to a health.
func GroupSnapshotHealth(phase string) Health {
	switch topolvmv1.GroupSnapshotPhase(phase) {
	case topolvmv1.GroupSnapshotReady:
		return HealthOK
	case topolvmv1.GroupSnapshotRefused:
		return HealthWarning
	case topolvmv1.GroupSnapshotFailed:
		return HealthError
	}
	return HealthInfo
}

// GroupSnapshots returns every group snapshot with its members, by node and name.
func GroupSnapshots(s *Snapshot) []GroupSnapshotView {
	return newIndex(s).groupSnapshots("")
}

// groupSnapshots returns the group snapshots of node (every node for ""), by node and name. Members are
// joined by the spec's member list and by the group snapshot label on the LogicalVolumes.
func (x *index) groupSnapshots(node string) []GroupSnapshotView {
	if len(x.s.GroupSnapshots) == 0 {
		return nil
	}
	lvs := make(map[string]*topolvmv1.LogicalVolume, len(x.s.LogicalVolumes))
	labelled := map[string][]*topolvmv1.LogicalVolume{}
	for i := range x.s.LogicalVolumes {
		lv := &x.s.LogicalVolumes[i]
		lvs[lv.Name] = lv
		if g, ok := lv.Labels[topolvmv1.GroupSnapshotMemberLabel]; ok {
			labelled[g] = append(labelled[g], lv)
		}
	}
	var out []GroupSnapshotView
	for i := range x.s.GroupSnapshots {
		g := &x.s.GroupSnapshots[i]
		if node != "" && g.Spec.NodeName != node {
			continue
		}
		v := GroupSnapshotView{Name: g.Name, Node: g.Spec.NodeName, DeviceClass: g.Spec.DeviceClass, Phase: string(g.Status.Phase),
			Reason: g.Status.Reason, Message: g.Status.Message, Created: g.CreationTimestamp.Time, Members: []GroupMember{}}
		if v.Phase == "" {
			v.Phase = string(topolvmv1.GroupSnapshotPending)
		}
		if n := g.Annotations[topolvmv1.AnnotationVolumeGroupSnapshotName]; n != "" {
			v.VolumeGroupSnapshot = n
			if ns := g.Annotations[topolvmv1.AnnotationVolumeGroupSnapshotNamespace]; ns != "" {
				v.VolumeGroupSnapshot = ns + "/" + n
			}
		}
		if st := g.Status.SuspendTime; st != nil {
			d := st.Duration
			v.SuspendTime = &d
		}
		v.Health = GroupSnapshotHealth(v.Phase)
		listed := map[string]bool{}
		for _, m := range g.Spec.Members {
			listed[m.Snapshot] = true
			v.Members = append(v.Members, x.groupMember(m.Snapshot, m.Source, lvs[m.Snapshot], lvs[m.Source], true))
		}
		for _, lv := range labelled[g.Name] {
			if !listed[lv.Name] {
				v.Members = append(v.Members, x.groupMember(lv.Name, lv.Spec.Source, lv, lvs[lv.Spec.Source], false))
			}
		}
		out = append(out, v)
	}
	slices.SortStableFunc(out, func(a, b GroupSnapshotView) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// groupMember joins a member's snapshot LogicalVolume lv (nil when missing) and the claim of its source
// LogicalVolume src (nil when missing).
func (x *index) groupMember(snapshot, source string, lv, src *topolvmv1.LogicalVolume, listed bool) GroupMember {
	m := GroupMember{Snapshot: snapshot, Source: source, Listed: listed}
	if lv != nil {
		m.Exists = true
		m.Size = bytesOf(lv.Status.CurrentSize)
		if m.Size == nil {
			b := mkBytes(lv.Spec.Size.Value())
			m.Size = &b
		}
		m.Message = lv.Status.Message
		m.Ready = lv.Status.VolumeID != "" && lv.Status.Code == 0
	}
	m.SourcePVC = x.claimOfVolume(src)
	return m
}

// claimOfVolume is the claim ("namespace/name") bound to LogicalVolume lv's PersistentVolume, "" for none.
func (x *index) claimOfVolume(lv *topolvmv1.LogicalVolume) string {
	if lv == nil {
		return ""
	}
	l := x.links()
	pv := l.pvByHandle[lv.Status.VolumeID]
	if pv == nil || lv.Status.VolumeID == "" {
		pv = l.pvByName[lv.Name]
	}
	if pv == nil || pv.Spec.ClaimRef == nil {
		return ""
	}
	return pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name
}

// isGroupMember reports whether lv is a member snapshot of a group snapshot in the snapshot.
func (x *index) isGroupMember(lv *topolvmv1.LogicalVolume) bool {
	g, ok := lv.Labels[topolvmv1.GroupSnapshotMemberLabel]
	if !ok {
		return false
	}
	x.groupsOnce.Do(func() {
		x.groups = make(map[string]bool, len(x.s.GroupSnapshots))
		for i := range x.s.GroupSnapshots {
			x.groups[x.s.GroupSnapshots[i].Name] = true
		}
	})
	return x.groups[g]
}
