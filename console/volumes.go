package console

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/console/explain"
)

// Volumes returns every LogicalVolume followed to its PersistentVolume, claim and pods; the ones that need
// attention first, then by node and name.
func Volumes(s *Snapshot) []VolumeView {
	x := newIndex(s)
	out := make([]VolumeView, 0, len(s.LogicalVolumes))
	for i := range s.LogicalVolumes {
		out = append(out, x.volume(&s.LogicalVolumes[i]))
	}
	out = append(out, x.pendingClaims()...)
	sortVolumes(out)
	return out
}

// selectedNodeAnnotation is where the scheduler puts the node it chose for a WaitForFirstConsumer claim.
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// pendingClaims are the claims of LVMS StorageClasses (or of a missing lvms-* class) that have no volume
// yet, each with why: its class is missing, it waits for a pod (the class binds on first consumer), or LVMS
// is provisioning it on the node the scheduler chose (with the claim's last warning, when there is one).
func (x *index) pendingClaims() []VolumeView {
	var out []VolumeView
	for i := range x.s.PVCs {
		c := &x.s.PVCs[i]
		if c.Spec.StorageClassName == nil || c.Spec.VolumeName != "" || (c.Status.Phase != corev1.ClaimPending && c.Status.Phase != "") {
			continue
		}
		class := *c.Spec.StorageClassName
		sc, exists := x.scs[class]
		if exists && !isLVMSProvisioner(sc.Provisioner) || !exists && (x.s.IsHidden("storageclasses.storage.k8s.io") || !strings.HasPrefix(class, defaultClassPrefix+"-")) {
			continue
		}
		key := c.Namespace + "/" + c.Name
		node := c.Annotations[selectedNodeAnnotation]
		v := VolumeView{Node: node, StorageClass: class, PVC: key, ClaimNamespace: c.Namespace, ClaimName: c.Name, PVCPhase: string(corev1.ClaimPending),
			Pods: x.links().podsByPVC[key], Health: HealthInfo, Move: moveOf(c)}
		if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			v.Size = mkBytes(q.Value())
		}
		if exists {
			v.DeviceClass = deviceClassOf(sc)
		}
		ctx := explain.Context{Node: node}
		var t Explanation
		switch {
		case !exists:
			t = explain.Topic(explain.TopicStorageClassMissing, "Claim "+key+" names StorageClass "+class+", which does not exist: it stays Pending until it does.", ctx)
			v.Health = HealthError
		case node == "" && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer:
			t = explain.Topic(explain.TopicClaimPending, "StorageClass "+class+" binds on first consumer: no pod that uses the claim has been scheduled yet, so no node is chosen.", ctx)
		case node == "":
			t = explain.Topic(explain.TopicClaimPending, "No node is chosen for it yet.", ctx)
		default:
			detail := "The scheduler chose node " + node + "; LVMS is creating the volume there."
			if w := x.lastWarning("PersistentVolumeClaim", c.Namespace, c.Name); w != nil {
				detail += " Its last warning (" + w.Reason + "): " + w.Message
				v.Health = HealthWarning
			}
			t = explain.Topic(explain.TopicClaimPending, detail, ctx)
		}
		v.Topic = &t
		out = append(out, v)
	}
	return out
}

// lastWarning is the newest Warning event about the object, or nil.
func (x *index) lastWarning(kind, namespace, name string) *corev1.Event {
	var last *corev1.Event
	for i := range x.s.Events {
		e := &x.s.Events[i]
		o := e.InvolvedObject
		if e.Type == corev1.EventTypeWarning && o.Kind == kind && o.Namespace == namespace && o.Name == name &&
			(last == nil || eventTime(*e).After(eventTime(*last))) {
			last = e
		}
	}
	return last
}

// volumesOn returns the volumes of one node.
func (x *index) volumesOn(node string) []VolumeView {
	lvs := x.lvsByNode[node]
	out := make([]VolumeView, 0, len(lvs))
	for _, lv := range lvs {
		out = append(out, x.volume(lv))
	}
	sortVolumes(out)
	return out
}

func sortVolumes(vs []VolumeView) {
	slices.SortStableFunc(vs, func(a, b VolumeView) int {
		if a.Health.Rank() != b.Health.Rank() {
			return b.Health.Rank() - a.Health.Rank()
		}
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// volumeLinks are the lookups from a LogicalVolume to its PV, claim and pods.
type volumeLinks struct {
	pvByHandle map[string]*corev1.PersistentVolume
	pvByName   map[string]*corev1.PersistentVolume
	pvc        map[string]*corev1.PersistentVolumeClaim
	podsByPVC  map[string][]string
}

func (x *index) links() *volumeLinks {
	x.vlinksOnce.Do(x.buildLinks)
	return x.vlinks
}

func (x *index) buildLinks() {
	l := &volumeLinks{pvByHandle: map[string]*corev1.PersistentVolume{}, pvByName: map[string]*corev1.PersistentVolume{},
		pvc: map[string]*corev1.PersistentVolumeClaim{}, podsByPVC: map[string][]string{}}
	for i := range x.s.PVs {
		pv := &x.s.PVs[i]
		l.pvByName[pv.Name] = pv
		if pv.Spec.CSI != nil {
			l.pvByHandle[pv.Spec.CSI.VolumeHandle] = pv
		}
	}
	for i := range x.s.PVCs {
		c := &x.s.PVCs[i]
		l.pvc[c.Namespace+"/"+c.Name] = c
	}
	for _, p := range x.s.Pods {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				k := p.Namespace + "/" + v.PersistentVolumeClaim.ClaimName
				l.podsByPVC[k] = append(l.podsByPVC[k], p.Namespace+"/"+p.Name)
			}
		}
	}
	x.vlinks = l
}

func (x *index) volume(lv *topolvmv1.LogicalVolume) VolumeView {
	l := x.links()
	v := VolumeView{Name: lv.Name, Node: lv.Spec.NodeName, DeviceClass: lv.Spec.DeviceClass, Size: mkBytes(lv.Spec.Size.Value()),
		CurrentSize: bytesOf(lv.Status.CurrentSize), VolumeID: lv.Status.VolumeID, Message: lv.Status.Message, Health: HealthOK}
	if vg := sharedVolumeGroup(lv); vg != "" {
		v.SharedVolumeGroup, v.ActiveOn = vg, x.activations()[sharedLVKey{vg, lv.Status.VolumeID}]
	}
	pv := l.pvByHandle[lv.Status.VolumeID]
	if pv == nil || lv.Status.VolumeID == "" {
		pv = l.pvByName[lv.Name]
	}
	if pv != nil {
		v.PV, v.PVPhase, v.StorageClass = pv.Name, string(pv.Status.Phase), pv.Spec.StorageClassName
		if ref := pv.Spec.ClaimRef; ref != nil {
			key := ref.Namespace + "/" + ref.Name
			v.PVC, v.ClaimNamespace, v.ClaimName = key, ref.Namespace, ref.Name
			if c := l.pvc[key]; c != nil {
				v.PVCPhase = string(c.Status.Phase)
				v.Move = moveOf(c)
			}
			v.Pods = l.podsByPVC[key]
		}
	}
	ctx := explain.Context{Node: lv.Spec.NodeName}
	switch {
	case lv.Status.Code != 0 || (lv.Status.Message != "" && lv.Status.VolumeID == ""):
		t := explain.Topic(explain.TopicVolumeError, "The agent says: \""+lv.Status.Message+"\".", ctx)
		v.Topic, v.Health = &t, HealthError
	case pv == nil && x.s.IsHidden("persistentvolumes"):
	case pv == nil && x.isGroupMember(lv):
		// A member snapshot of a group snapshot has no PersistentVolume: the group is what it belongs to.
	case pv == nil:
		t := explain.Topic(explain.TopicVolumeOrphaned, "", ctx)
		v.Topic, v.Health = &t, HealthWarning
	}
	return v
}
