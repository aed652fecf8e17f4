package consoletest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// The cases on which the console's front ends (web, TUI, JSON API, plugin) once said different things
// (issue 41), one of each, on top of the sandbox state:
//   - StorageClass lvms-vg1 exists (the cluster's default by its annotation, as kubectl shows it) and
//     VolumeSnapshotClass lvms-fast exists, while StorageClass lvms-fast does not;
//   - device class vg1 is default (its LVMCluster's only class) and cannot provision on SandboxNode3, so its
//     free space is not usable there;
//   - SandboxNode2, which an LVMNode manages, also has a v1 LVMVolumeGroupNodeStatus: its "nothing is desired
//     here" is not the node's health, its CasesV1Condition is, on that object;
//   - events counted the core way (CasesCoreCount) and the events.k8s.io way (CasesSeriesCount);
//   - a Pending claim of lvms-vg1 on the node the scheduler chose, and one of a class that does not exist.
const (
	CasesV1Condition  = "the v1 object of lvms-local-2 says its device classes are unhealthy"
	CasesCoreCount    = 3
	CasesSeriesCount  = 7
	CasesWaitingClaim = "waiting"
	CasesOrphanClaim  = "orphan"
	CasesClaimNS      = "app"
)

// Cases returns the sandbox state with one of each case, in namespace ns at time at.
func Cases(ns string, at time.Time) []client.Object {
	objs := Sandbox(ns, at)
	vg1 := storageClass("lvms-vg1", "vg1")
	vg1.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	v1OfNode2 := &lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: SandboxNode2, Namespace: ns},
		Status: lvmv1.LVMVolumeGroupNodeStatusStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{
			cond(at, lvmv2.ConditionVolumeGroupsHealthy, true, lvmv2.ReasonNoVolumeGroups, "no volume group is desired on this node"),
			cond(at, lvmv2.ConditionDeviceClassesHealthy, false, "Legacy", CasesV1Condition)}}}
	core := event(ns, "node2-core", "LVMNode", SandboxNode2, corev1.EventTypeNormal, "VolumeGroupChecked", "checked vg-data", at.Add(-time.Minute))
	core.Count = CasesCoreCount
	series := event(ns, "node2-series", "LVMNode", SandboxNode2, corev1.EventTypeWarning, "ThinPoolFailed", "thin pool pool cannot be created", at)
	series.Count, series.Series = 0, &corev1.EventSeries{Count: CasesSeriesCount, LastObservedTime: metav1.NewMicroTime(at)}
	claim := func(name, class string, annotations map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: CasesClaimNS, Annotations: annotations},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *gi(1)}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	}
	return append(objs, vg1, snapshotClass("lvms-fast"), v1OfNode2, core, series,
		claim(CasesWaitingClaim, "lvms-vg1", map[string]string{"volume.kubernetes.io/selected-node": SandboxNode3}),
		claim(CasesOrphanClaim, "lvms-missing", nil))
}
