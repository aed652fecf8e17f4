package console

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// The oracle's second half (issue 41 point 13): on the same random worlds, the rules for what the console
// says of classes, defaults, conditions, class state, events and Pending claims, each written out here:
//   - a class check (StorageClass "lvms-<class>", VolumeSnapshotClass of a thin class) reads the cluster:
//     an LVMS class exists and matches, a foreign one exists and differs, an absent one is missing; when the
//     console may not read that kind, the agent's report decides, and without one it "cannot be known";
//   - a device class is default as its API says: v2 by its default field, v1 by its field or by being
//     the cluster's only class;
//   - a node lists each condition of its LVMNode and of its LVMVolumeGroupNodeStatus once, naming the
//     object it is on, except a v1 object's "nothing desired here" on a node an LVMNode manages;
//   - a device class's state on a node is the agent's (or "Not reported"), and its free space is usable
//     only where that state is healthy; the Device classes page says the same per node;
//   - an event counts as kubectl counts it: its series' count, else its count, at least 1;
//   - a Pending claim of an LVMS StorageClass (or of a missing lvms-* one) is listed with why it is
//     pending and the node the scheduler chose; a claim of another provisioner is not;
//   - every difference's row is as alarming as its explanation.

// Kinds of class a random world gives a device class.
const (
	classAbsent = iota
	classLVMS
	classForeign
)

// extension is what the second half of a random world holds besides the snapshot.
type extension struct {
	// scKind[class] and vscKind[class] are the StorageClass and VolumeSnapshotClass kinds generated.
	scKind, vscKind map[string]int
	// classState[node] is the state generated for class-0's status ("" when not reported).
	classState map[string]lvmv2.State
	// nodeStatus[node] is true when the node has a v1 LVMVolumeGroupNodeStatus.
	nodeStatus map[string]bool
}

const thinClass = "class-t"

// extend adds the second half's objects to a random world, after the first half's draws so those worlds
// stay as they were.
func extend(r *rand.Rand, w *world) {
	const ns = "lvms"
	x := &extension{scKind: map[string]int{}, vscKind: map[string]int{}, classState: map[string]lvmv2.State{}, nodeStatus: map[string]bool{}}
	w.ext = x
	s := w.snap
	// Defaults, and a second v1 class on the first one's nodes.
	for i := range s.LVMNodeSets {
		s.LVMNodeSets[i].Spec.Template.DeviceClasses[0].Default = r.IntN(3) == 0
	}
	s.LVMNodeSets[0].Spec.Template.DeviceClasses = append(s.LVMNodeSets[0].Spec.Template.DeviceClasses,
		lvmv2.DeviceClass{Name: thinClass, VolumeGroup: "vg-0", Strategy: lvmv2.StrategyThin, Thin: &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}})
	for i := range s.LVMClusters {
		dcs := &s.LVMClusters[i].Spec.Storage.DeviceClasses
		(*dcs)[0].Default = r.IntN(3) == 0
		if r.IntN(2) == 0 {
			*dcs = append(*dcs, lvmv1.DeviceClass{Name: "legacy-2", NodeSelector: (*dcs)[0].NodeSelector, Default: r.IntN(3) == 0})
		}
	}
	// The classes in the cluster, and which kinds the console may not read.
	var names []string
	for _, set := range s.LVMNodeSets {
		for _, dc := range set.Spec.Template.DeviceClasses {
			names = append(names, dc.Name)
		}
	}
	for _, c := range s.LVMClusters {
		for _, dc := range c.Spec.Storage.DeviceClasses {
			names = append(names, dc.Name)
		}
	}
	for _, dc := range names {
		x.scKind[dc] = r.IntN(3)
		if k := x.scKind[dc]; k != classAbsent {
			sc := storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms-" + dc}, Provisioner: "topolvm.io",
				Parameters: map[string]string{deviceClassParameters[0]: dc}}
			if k == classForeign {
				sc.Provisioner = "ebs.csi.aws.com"
			}
			s.StorageClasses = append(s.StorageClasses, sc)
		}
	}
	x.vscKind[thinClass] = r.IntN(3)
	switch x.vscKind[thinClass] {
	case classLVMS:
		s.SnapshotClasses = append(s.SnapshotClasses, SnapshotClass{Name: "lvms-" + thinClass, Driver: "topolvm.io", DeletionPolicy: "Delete"})
	case classForeign:
		s.SnapshotClasses = append(s.SnapshotClasses, SnapshotClass{Name: "lvms-" + thinClass, Driver: "ebs.csi.aws.com", DeletionPolicy: "Delete"})
	}
	if r.IntN(4) == 0 {
		s.Hidden = append(s.Hidden, HiddenKind{Resource: "storageclasses.storage.k8s.io", Reason: "forbidden"})
	}
	if r.IntN(4) == 0 {
		s.Hidden = append(s.Hidden, HiddenKind{Resource: "volumesnapshotclasses.snapshot.storage.k8s.io", Reason: "the cluster does not serve the snapshot API"})
	}
	reported := func() *lvmv2.ClassStatus {
		switch r.IntN(3) {
		case 0:
			return &lvmv2.ClassStatus{State: lvmv2.StateExists}
		case 1:
			return &lvmv2.ClassStatus{State: lvmv2.StateMissing}
		}
		return nil
	}
	states := []lvmv2.State{"", lvmv2.StateHealthy, lvmv2.StateDegraded, lvmv2.StateFailed}
	for i := range s.LVMNodes {
		n := &s.LVMNodes[i]
		n.Spec.DeviceClasses = append(n.Spec.DeviceClasses, s.LVMNodeSets[0].Spec.Template.DeviceClasses[1])
		n.Spec.DeviceClasses[0].Default = s.LVMNodeSets[0].Spec.Template.DeviceClasses[0].Default
		if vs := states[1+r.IntN(len(states)-1)]; vs != lvmv2.StateHealthy {
			n.Status.VolumeGroups[0].State, n.Status.VolumeGroups[0].Message = vs, "volume group vg-0 is "+string(vs)+" on "+n.Name
		}
		st := states[r.IntN(len(states))]
		x.classState[n.Name] = st
		n.Status.DeviceClasses = nil
		if st != "" {
			dcs := lvmv2.DeviceClassStatus{Name: "class-0", VolumeGroup: "vg-0", State: st, StorageClass: reported()}
			if st != lvmv2.StateHealthy {
				dcs.Message = "device class class-0 cannot provision volumes: reason " + n.Name
			}
			n.Status.DeviceClasses = append(n.Status.DeviceClasses, dcs)
		}
		n.Status.DeviceClasses = append(n.Status.DeviceClasses, lvmv2.DeviceClassStatus{Name: thinClass, VolumeGroup: "vg-0",
			State: lvmv2.StateDegraded, Message: "thin pool pool is not created yet", StorageClass: reported(), SnapshotClass: reported()})
		// Conditions on the LVMNode, and on a v1 object for some nodes.
		for _, t := range []string{lvmv2.ConditionVolumeGroupsHealthy, lvmv2.ConditionDeviceClassesHealthy} {
			if r.IntN(3) > 0 {
				status := metav1.ConditionTrue
				if r.IntN(2) == 0 {
					status = metav1.ConditionFalse
				}
				n.Status.Conditions = append(n.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: "Checked", Message: t + " on the LVMNode"})
			}
		}
		if r.IntN(2) == 0 {
			x.nodeStatus[n.Name] = true
			var conds []metav1.Condition
			for _, t := range []string{lvmv2.ConditionVolumeGroupsHealthy, lvmv2.ConditionDeviceClassesHealthy} {
				switch r.IntN(3) {
				case 0:
					reason := lvmv2.ReasonNoVolumeGroups
					if t == lvmv2.ConditionDeviceClassesHealthy {
						reason = lvmv2.ReasonNoDeviceClasses
					}
					conds = append(conds, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: "nothing is desired on this node"})
				case 1:
					conds = append(conds, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: "Checked", Message: t + " on the v1 object"})
				}
			}
			s.NodeStatuses = append(s.NodeStatuses, lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: ns},
				Status: lvmv1.LVMVolumeGroupNodeStatusStatus{Conditions: conds}})
		}
		// Events about the node, counted the core way or the events.k8s.io way.
		for e := range r.IntN(3) {
			ev := corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", n.Name, e), Namespace: ns},
				InvolvedObject: corev1.ObjectReference{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNode", Namespace: ns, Name: n.Name},
				Type:           corev1.EventTypeNormal, Reason: fmt.Sprintf("Reason%d", e), Message: "event " + n.Name, Count: int32(r.IntN(6))}
			if r.IntN(2) == 0 {
				ev.Count, ev.Series = 0, &corev1.EventSeries{Count: int32(2 + r.IntN(8))}
			}
			s.Events = append(s.Events, ev)
		}
	}
	// Pending claims of each kind of class, some with a node chosen.
	for i := range r.IntN(4) {
		class := []string{"lvms-class-0", "lvms-nope", "other"}[r.IntN(3)]
		c := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", i), Namespace: "app", Annotations: map[string]string{}},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class)}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
		if r.IntN(2) == 0 {
			c.Annotations[selectedNodeAnnotation] = s.Nodes[r.IntN(len(s.Nodes))].Name
		}
		s.PVCs = append(s.PVCs, c)
	}
}

func hidden(s *Snapshot, resource string) bool {
	return slices.ContainsFunc(s.Hidden, func(h HiddenKind) bool { return h.Resource == resource })
}

// checkClass is the class check rule; reported is the agent's report ("" when none).
func checkClass(what string, c *ClassCheck, kind int, unreadable bool, reported lvmv2.State) string {
	if c == nil {
		return what + ": no check"
	}
	var inCluster, differs, unknown bool
	switch {
	case unreadable && reported == "":
		unknown = true
	case unreadable:
		inCluster = reported != lvmv2.StateMissing
		differs = !inCluster
	default:
		inCluster = kind != classAbsent
		differs = kind != classLVMS
	}
	if c.InCluster != inCluster || c.Differs != differs || (c.Unknown != "") != unknown {
		return fmt.Sprintf("%s (kind %d, unreadable %v, reported %q): inCluster %v differs %v unknown %q; want inCluster %v differs %v unknown %v",
			what, kind, unreadable, reported, c.InCluster, c.Differs, c.Unknown, inCluster, differs, unknown)
	}
	return ""
}

func reportedState(c *lvmv2.ClassStatus) lvmv2.State {
	if c == nil {
		return ""
	}
	return c.State
}

func (w *world) checkMore() string {
	s, x := w.snap, w.ext
	scHidden := hidden(s, "storageclasses.storage.k8s.io")
	vscHidden := hidden(s, "volumesnapshotclasses.snapshot.storage.k8s.io")
	classViews := DeviceClasses(s)
	// Defaults, as each API defines them.
	for _, dc := range classViews {
		want := false
		for _, set := range s.LVMNodeSets {
			for _, t := range set.Spec.Template.DeviceClasses {
				if t.Name == dc.Name {
					want = t.Default
				}
			}
		}
		for _, c := range s.LVMClusters {
			for _, t := range c.Spec.Storage.DeviceClasses {
				if t.Name == dc.Name {
					want = t.Default || len(c.Spec.Storage.DeviceClasses) == 1
				}
			}
		}
		if dc.Default != want {
			return fmt.Sprintf("class %s: default %v, want %v", dc.Name, dc.Default, want)
		}
		if dc.Source.Kind == "LVMCluster" {
			if msg := checkClass("class "+dc.Name+"'s StorageClass", dc.StorageClass, x.scKind[dc.Name], scHidden, ""); msg != "" {
				return msg
			}
		}
	}
	for _, n := range s.LVMNodes {
		v, err := Node(s, n.Name)
		if err != nil {
			return err.Error()
		}
		// Class checks and class state, on the node and on the Device classes page.
		for _, name := range []string{"class-0", thinClass} {
			i := slices.IndexFunc(v.DeviceClasses, func(d NodeDeviceClass) bool { return d.Name == name })
			if i < 0 {
				return fmt.Sprintf("node %s: class %s not listed", n.Name, name)
			}
			dc := v.DeviceClasses[i]
			var st *lvmv2.DeviceClassStatus
			if j := slices.IndexFunc(n.Status.DeviceClasses, func(d lvmv2.DeviceClassStatus) bool { return d.Name == name }); j >= 0 {
				st = &n.Status.DeviceClasses[j]
			}
			var rsc, rvsc *lvmv2.ClassStatus
			if st != nil {
				rsc, rvsc = st.StorageClass, st.SnapshotClass
			}
			if msg := checkClass("node "+n.Name+" class "+name+"'s StorageClass", dc.StorageClass, x.scKind[name], scHidden, reportedState(rsc)); msg != "" {
				return msg
			}
			if name == thinClass {
				if msg := checkClass("node "+n.Name+" class "+name+"'s VolumeSnapshotClass", dc.SnapshotClass, x.vscKind[name], vscHidden, reportedState(rvsc)); msg != "" {
					return msg
				}
			} else if dc.SnapshotClass != nil {
				return fmt.Sprintf("node %s: thick class %s has a VolumeSnapshotClass check", n.Name, name)
			}
			if name != "class-0" {
				continue
			}
			wantState := "Not reported"
			if st != nil {
				wantState = string(st.State)
			}
			free := n.Status.VolumeGroups[0].Free.Value()
			usable := st != nil && (st.State == lvmv2.StateHealthy || st.State == lvmv2.StateReady)
			wantFree, wantUnusable := free, int64(0)
			if !usable {
				wantFree, wantUnusable = 0, free
			}
			if dc.State != wantState || dc.Capacity == nil || dc.Capacity.Free.Value != wantFree || dc.Capacity.Unusable.Value != wantUnusable ||
				(wantUnusable > 0) != strings.HasPrefix(dc.Capacity.UnusableReason, n.Name+": ") {
				return fmt.Sprintf("node %s class-0: state %q, capacity %+v; want %q, free %d, unusable %d", n.Name, dc.State, dc.Capacity, wantState, wantFree, wantUnusable)
			}
			// The Device classes page says the same of this node.
			cv := classViews[slices.IndexFunc(classViews, func(d DeviceClassView) bool { return d.Name == "class-0" })]
			k := slices.IndexFunc(cv.Nodes, func(d NodeDeviceClass) bool { return d.Source.Name == n.Name })
			if k < 0 || cv.Nodes[k].State != dc.State || cv.Nodes[k].Capacity == nil || *cv.Nodes[k].Capacity != *dc.Capacity {
				return fmt.Sprintf("node %s class-0: the Device classes page says %+v, the node page %+v", n.Name, cv.Nodes[max(k, 0)], dc)
			}
		}
		// Conditions: each object's, once, naming its object.
		type cond struct{ kind, typ, status, reason, message string }
		var want []cond
		for _, c := range n.Status.Conditions {
			want = append(want, cond{"LVMNode", c.Type, string(c.Status), c.Reason, c.Message})
		}
		for _, ns := range s.NodeStatuses {
			if ns.Name != n.Name {
				continue
			}
			for _, c := range ns.Status.Conditions {
				if c.Reason == lvmv2.ReasonNoVolumeGroups || c.Reason == lvmv2.ReasonNoDeviceClasses {
					continue // says nothing of a node an LVMNode manages
				}
				want = append(want, cond{"LVMVolumeGroupNodeStatus", c.Type, string(c.Status), c.Reason, c.Message})
			}
		}
		var got []cond
		for _, c := range v.Conditions {
			if c.Object == nil || c.Object.Name != n.Name {
				return fmt.Sprintf("node %s: condition %s %s names no object of the node: %+v", n.Name, c.Type, c.Status, c.Object)
			}
			got = append(got, cond{c.Object.Kind, c.Type, c.Status, c.Reason, c.Message})
		}
		sortConds := func(cs []cond) {
			slices.SortFunc(cs, func(a, b cond) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		}
		sortConds(want)
		sortConds(got)
		if !slices.Equal(got, want) {
			return fmt.Sprintf("node %s: conditions %v, want %v", n.Name, got, want)
		}
		// Events, counted as kubectl counts them.
		for _, e := range s.Events {
			if e.InvolvedObject.Name != n.Name {
				continue
			}
			count := max(e.Count, 1)
			if e.Series != nil {
				count = e.Series.Count
			}
			i := slices.IndexFunc(v.Events, func(ev EventView) bool { return ev.Reason == e.Reason && ev.Object.Name == n.Name })
			if i < 0 || v.Events[i].Count != count {
				return fmt.Sprintf("node %s: event %s (count %d, series %v) shown as %+v, want count %d", n.Name, e.Reason, e.Count, e.Series, v.Events, count)
			}
		}
		// A difference is as alarming as its explanation.
		for _, d := range v.Differences {
			if d.Health != healthOf(d.Explanation.Severity) {
				return fmt.Sprintf("node %s: difference %q → %q is %s, its explanation %q %s", n.Name, d.Desired, d.Actual, d.Health, d.Explanation.Title, d.Explanation.Severity)
			}
		}
	}
	// Pending claims.
	vols := Volumes(s)
	for _, c := range s.PVCs {
		class := *c.Spec.StorageClassName
		kind, exists := classAbsent, false
		for _, sc := range s.StorageClasses {
			if sc.Name == class {
				exists, kind = true, classForeign
				if sc.Provisioner == "topolvm.io" {
					kind = classLVMS
				}
			}
		}
		listed := kind == classLVMS || !exists && !scHidden && strings.HasPrefix(class, "lvms-")
		key := c.Namespace + "/" + c.Name
		i := slices.IndexFunc(vols, func(v VolumeView) bool { return v.PVC == key })
		switch {
		case listed && i < 0:
			return fmt.Sprintf("Pending claim %s of %s (exists %v, kind %d) is not listed", key, class, exists, kind)
		case !listed && i >= 0:
			return fmt.Sprintf("claim %s of %s (exists %v, kind %d, classes unreadable %v) is listed: %+v", key, class, exists, kind, scHidden, vols[i])
		case listed && (vols[i].PVCPhase != "Pending" || vols[i].Topic == nil || vols[i].Node != c.Annotations[selectedNodeAnnotation]):
			return fmt.Sprintf("Pending claim %s: %+v, want Pending on %q with why", key, vols[i], c.Annotations[selectedNodeAnnotation])
		}
	}
	return ""
}
