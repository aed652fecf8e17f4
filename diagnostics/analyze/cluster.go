package analyze

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/console/explain"
	"github.com/lvms-dev/lvms/operator/claims"
	"github.com/lvms-dev/lvms/operator/names"
)

// StuckAfter is how long a LogicalVolume may wait to be created or deleted before it counts as stuck, and
// a claim may stay Pending before it is reported.
const StuckAfter = 5 * time.Minute

// lvmsProvisioners are the provisioners (CSI drivers) of LVMS.
var lvmsProvisioners = driver.KnownDrivers()

// lvmsClasses returns the StorageClasses of LVMS's provisioners by name.
func (in *input) lvmsClasses() map[string]*storagev1.StorageClass {
	out := map[string]*storagev1.StorageClass{}
	for i := range in.snap.StorageClasses {
		if sc := &in.snap.StorageClasses[i]; slices.Contains(lvmsProvisioners, sc.Provisioner) {
			out[sc.Name] = sc
		}
	}
	return out
}

// checkDriver reports a missing CSIDriver object and nodes on which the kubelet has not registered the
// driver (CSINode).
func checkDriver(in *input) []Finding {
	if len(in.snap.LVMNodeSets) == 0 && len(in.snap.LVMClusters) == 0 {
		return nil
	}
	var drivers []string
	for _, sc := range in.lvmsClasses() {
		drivers = append(drivers, sc.Provisioner)
	}
	if len(drivers) == 0 {
		drivers = []string{topolvmv1.GroupName}
	}
	slices.Sort(drivers)
	drivers = slices.Compact(drivers)
	var out []Finding
	if in.ran("resources/csidrivers.storage.k8s.io") {
		for _, d := range drivers {
			if !slices.ContainsFunc(in.csiDrivers, func(c *storagev1.CSIDriver) bool { return c.Name == d }) {
				out = append(out, Finding{Severity: Fail, Title: "CSIDriver missing", InvolvedObject: &Object{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver", Name: d},
					Message: fmt.Sprintf("There is no CSIDriver %s, though StorageClasses or LVMS objects use it: kubelet will not mount its volumes.", d),
					Fix:     "The operator creates the CSIDriver: check that it runs and read its log.", Command: "kubectl get csidriver " + d})
			}
		}
	}
	if !in.ran("resources/csinodes.storage.k8s.io") {
		return out
	}
	selected := in.selectedNodes()
	for _, node := range sortedKeys(selected) {
		cn, ok := in.csiNodes[node]
		if !ok {
			if slices.ContainsFunc(in.snap.Nodes, func(n corev1.Node) bool { return n.Name == node }) {
				out = append(out, Finding{Severity: Warn, Title: "No CSINode for a selected node", Node: node, InvolvedObject: &Object{APIVersion: "v1", Kind: "Node", Name: node},
					Message: fmt.Sprintf("Node %s has no CSINode object: its kubelet has registered no CSI driver at all.", node),
					Fix:     "Check that the kubelet on the node runs and can reach the API server."})
			}
			continue
		}
		for _, d := range drivers {
			if d == names.SharedCSIDriverName {
				continue
			}
			if !slices.ContainsFunc(cn.Spec.Drivers, func(x storagev1.CSINodeDriver) bool { return x.Name == d }) {
				out = append(out, Finding{Severity: Fail, Title: "CSI driver not registered on a node", Node: node,
					InvolvedObject: &Object{APIVersion: "storage.k8s.io/v1", Kind: "CSINode", Name: node},
					Message:        fmt.Sprintf("The kubelet on node %s has not registered %s: volumes cannot be mounted there and the scheduler will not place them there.", node, d),
					Fix:            "The node agent registers the driver with the kubelet through its plugin registration socket: check the agent pod on the node and its log.",
					Command:        "kubectl get csinode " + node + " -o yaml"})
			}
		}
	}
	return out
}

// capacityMessage matches the provisioner's (and the external provisioner's) messages about space.
var capacityMessage = regexp.MustCompile(`(?i)not enough space|insufficient (space|capacity)|ResourceExhausted|out of (space|capacity)|no node has .* free|does not have enough capacity`)

// checkPVCCapacity reports Pending claims on LVMS classes that cannot be provisioned for lack of space, and
// others Pending for longer than StuckAfter.
func checkPVCCapacity(in *input) []Finding {
	classes := in.lvmsClasses()
	var out []Finding
	for i := range in.snap.PVCs {
		c := &in.snap.PVCs[i]
		if c.Status.Phase != corev1.ClaimPending || c.Spec.StorageClassName == nil || classes[*c.Spec.StorageClassName] == nil {
			continue
		}
		sc := classes[*c.Spec.StorageClassName]
		obj := &Object{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name}
		want := c.Spec.Resources.Requests[corev1.ResourceStorage]
		evidence := in.capacityEvidence(c, sc, want)
		if evidence != "" {
			out = append(out, Finding{Severity: Fail, Title: "Claim pending for capacity", InvolvedObject: obj,
				Node:    c.Annotations[driver.SelectedNodeAnnotation],
				Message: fmt.Sprintf("PersistentVolumeClaim %s/%s (%s, StorageClass %s) is Pending for lack of space: %s.", c.Namespace, c.Name, want.String(), sc.Name, evidence),
				Fix:     "Request less, free space (delete unused volumes or snapshots on the node), or add a device to the volume group; with WaitForFirstConsumer the scheduler may pick another node once capacity is published.",
				Command: fmt.Sprintf("kubectl describe pvc -n %s %s", c.Namespace, c.Name)})
			continue
		}
		if age := in.at.Sub(c.CreationTimestamp.Time); !c.CreationTimestamp.IsZero() && age >= StuckAfter {
			out = append(out, Finding{Severity: Warn, Title: "Claim pending", InvolvedObject: obj,
				Message: fmt.Sprintf("PersistentVolumeClaim %s/%s has been Pending for %s with no sign of a capacity problem.", c.Namespace, c.Name, age.Round(time.Second)),
				Fix:     "With WaitForFirstConsumer a claim waits for a pod that uses it; otherwise read the claim's events and the operator's log.",
				Command: fmt.Sprintf("kubectl describe pvc -n %s %s", c.Namespace, c.Name)})
		}
	}
	return out
}

// capacityEvidence says why a claim lacks space: an event, the selected node's capacity annotation, or the
// published CSIStorageCapacities; "" when nothing says so.
func (in *input) capacityEvidence(c *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, want resource.Quantity) string {
	for i := range in.snap.Events {
		e := &in.snap.Events[i]
		o := e.InvolvedObject
		if o.Kind == "PersistentVolumeClaim" && o.Namespace == c.Namespace && o.Name == c.Name && capacityMessage.MatchString(e.Message) {
			return "event " + e.Reason + ": " + strings.TrimSuffix(e.Message, ".")
		}
	}
	names := driver.New(sc.Provisioner == topolvmv1.LegacyGroupName)
	dc := sc.Parameters[names.DeviceClassParam()]
	if node := c.Annotations[driver.SelectedNodeAnnotation]; node != "" {
		for i := range in.snap.Nodes {
			n := &in.snap.Nodes[i]
			if n.Name != node {
				continue
			}
			if v, ok := n.Annotations[names.CapacityAnnotation(dc)]; ok {
				if free, err := strconv.ParseInt(v, 10, 64); err == nil && free < want.Value() {
					return fmt.Sprintf("the selected node %s has %s free in device class %s", node, resource.NewQuantity(free, resource.BinarySI), orDefault(dc))
				}
			}
		}
	}
	var most *resource.Quantity
	for _, cap := range in.capacities {
		if cap.StorageClassName == sc.Name && cap.Capacity != nil && (most == nil || cap.Capacity.Cmp(*most) > 0) {
			most = cap.Capacity
		}
	}
	if most != nil && most.Cmp(want) < 0 {
		return fmt.Sprintf("no node publishes that much for %s: the most is %s", sc.Name, most)
	}
	return ""
}

func orDefault(dc string) string {
	if dc == "" {
		return driver.DefaultDeviceClassKey
	}
	return dc
}

// checkLogicalVolumeStuck reports LogicalVolumes that report an error, were not created, or are not deleted
// StuckAfter after they should have been.
func checkLogicalVolumeStuck(in *input) []Finding {
	var out []Finding
	for i := range in.snap.LogicalVolumes {
		lv := &in.snap.LogicalVolumes[i]
		obj := &Object{APIVersion: "topolvm.io/v1", Kind: "LogicalVolume", Name: lv.Name}
		ctx := explain.Context{Node: lv.Spec.NodeName}
		switch {
		case lv.DeletionTimestamp != nil && in.at.Sub(lv.DeletionTimestamp.Time) >= StuckAfter:
			out = append(out, Finding{Severity: Fail, Title: "LogicalVolume stuck deleting", InvolvedObject: obj, Node: lv.Spec.NodeName,
				Message: fmt.Sprintf("LogicalVolume %s was deleted %s ago and still waits for %s (finalizers %s).", lv.Name,
					in.at.Sub(lv.DeletionTimestamp.Time).Round(time.Second), lv.Spec.NodeName, strings.Join(lv.Finalizers, ", ")),
				Fix: "The node agent on the node removes the LV and the finalizer: check that it runs there. If the node is gone for good, the operator's node removal cleans up."})
		case lv.Status.Code != 0 || (lv.Status.Message != "" && lv.Status.VolumeID == ""):
			f := fromExplanation(explain.Topic(explain.TopicVolumeError, "The agent says: \""+lv.Status.Message+"\".", ctx), "")
			f.Severity, f.Title = Fail, "LogicalVolume failed"
			f.InvolvedObject, f.Node, f.Codes = obj, lv.Spec.NodeName, []string{"code " + strconv.Itoa(int(lv.Status.Code))}
			out = append(out, f)
		case lv.Status.VolumeID == "" && lv.DeletionTimestamp == nil && !lv.CreationTimestamp.IsZero() && in.at.Sub(lv.CreationTimestamp.Time) >= StuckAfter:
			out = append(out, Finding{Severity: Fail, Title: "LogicalVolume not created", InvolvedObject: obj, Node: lv.Spec.NodeName,
				Message: fmt.Sprintf("LogicalVolume %s (%s in device class %s) was created %s ago and node %s has not created its LV.", lv.Name,
					lv.Spec.Size.String(), orDefault(lv.Spec.DeviceClass), in.at.Sub(lv.CreationTimestamp.Time).Round(time.Second), lv.Spec.NodeName),
				Fix: "Check that the node agent runs on the node and read its log for the LogicalVolume's name."})
		}
	}
	return out
}

// conflicts runs the operator's claim rules over every namespace.
func (in *input) conflicts() []setConflict {
	var out []setConflict
	for _, inv := range in.inventories {
		res := claims.Compute(inv.ClaimsInput())
		for _, s := range inv.NodeSets {
			for _, c := range res.NodeSet(s.Name).Conflicts {
				out = append(out, setConflict{namespace: inv.Namespace, set: s.Name, c: c})
			}
			for _, w := range res.NodeSet(s.Name).Waiting {
				out = append(out, setConflict{namespace: inv.Namespace, set: s.Name, waiting: w})
			}
		}
	}
	return out
}

type setConflict struct {
	namespace, set string
	c              claims.Conflict
	waiting        string
}

func setObject(ns, name string) *Object {
	return &Object{APIVersion: lvmv2.GroupVersion.String(), Kind: "LVMNodeSet", Namespace: ns, Name: name}
}

// checkConflictingSets reports LVMNodeSets that claim the same volume groups, devices or device classes on a
// node (each conflict once, on the set that does not get the node), and sets whose NoConflicts condition is
// False for a reason the rules above do not show.
func checkConflictingSets(in *input) []Finding {
	var out []Finding
	flagged := map[string]bool{}
	for _, sc := range in.conflicts() {
		if sc.waiting != "" || sc.c.WithKind != claims.KindNodeSet || sc.c.Kept {
			continue
		}
		flagged[sc.namespace+"/"+sc.set] = true
		out = append(out, Finding{Severity: Fail, Title: "LVMNodeSets conflict", InvolvedObject: setObject(sc.namespace, sc.set), Node: sc.c.Node,
			Message: fmt.Sprintf("LVMNodeSet %s/%s: %s.", sc.namespace, sc.set, sc.c.Message()),
			Fix:     "Narrow one set's nodeSelector, or rename the overlapping volume groups, devices or device classes so each is claimed by one set."})
	}
	for i := range in.snap.LVMNodeSets {
		s := &in.snap.LVMNodeSets[i]
		if flagged[s.Namespace+"/"+s.Name] {
			continue
		}
		for _, c := range s.Status.Conditions {
			if c.Type == lvmv2.ConditionNoConflicts && c.Status == "False" && !strings.Contains(c.Message, "LVMCluster") {
				f := fromExplanation(explain.Condition(c.Type, c.Reason, c.Message, explain.Context{}),
					fmt.Sprintf("LVMNodeSet %s/%s reports %s False (%s): %s", s.Namespace, s.Name, c.Type, c.Reason, c.Message))
				f.Severity, f.InvolvedObject, f.Codes = Fail, setObject(s.Namespace, s.Name), []string{c.Type}
				out = append(out, f)
			}
		}
	}
	return out
}

// checkDoubleManagement reports nodes both a v1alpha1 LVMCluster and a v2alpha1 LVMNodeSet claim (outside a
// migration), nodes with volume groups reported by both APIs, and, as pass, nodes waiting for a migration's
// hand-over.
func checkDoubleManagement(in *input) []Finding {
	var out []Finding
	for _, sc := range in.conflicts() {
		obj := setObject(sc.namespace, sc.set)
		switch {
		case sc.waiting != "":
			out = append(out, Finding{Severity: Pass, Title: "Node waiting for migration hand-over", InvolvedObject: obj, Node: sc.waiting,
				Message: fmt.Sprintf("Node %s stays with the LVMCluster that LVMNodeSet %s/%s migrates from until it is handed over.", sc.waiting, sc.namespace, sc.set),
				Fix:     "Nothing to do: `lvms migrate` hands nodes over one at a time."})
		case sc.c.WithKind == claims.KindCluster:
			out = append(out, Finding{Severity: Fail, Title: "Node claimed by both API versions", InvolvedObject: obj, Node: sc.c.Node,
				Message: fmt.Sprintf("LVMNodeSet %s/%s (v2alpha1) and LVMCluster %s (v1alpha1) both claim node %s (%s); LVMS leaves the node with the one that manages it and the other does nothing there.",
					sc.namespace, sc.set, sc.c.With, sc.c.Node, sc.c.Overlap),
				Fix: "Manage each node with one API: narrow the set's or the LVMCluster's node selector, or migrate with `lvms migrate`, which marks the set as the LVMCluster's successor."})
		}
	}
	for _, name := range in.names {
		v := in.views[name]
		if v == nil {
			continue
		}
		apis := map[string][]string{} // volume group -> API kinds reporting it
		for _, g := range v.VolumeGroups {
			if g.Reported {
				apis[g.Name] = append(apis[g.Name], g.Source.Kind)
			}
		}
		for _, vg := range sortedKeys(apis) {
			kinds := slices.Compact(slices.Sorted(slices.Values(apis[vg])))
			if len(kinds) > 1 {
				out = append(out, Finding{Severity: Fail, Title: "Volume group reported by both API versions", Node: name, VolumeGroup: vg, InvolvedObject: nodeObject(v),
					Message: fmt.Sprintf("Volume group %s on node %s is reported by %s: two node agents, or both APIs, manage it.", vg, name, strings.Join(kinds, " and ")),
					Fix:     "Remove the volume group from one API's spec (or finish the migration) so exactly one object manages it."})
			}
		}
	}
	return out
}
