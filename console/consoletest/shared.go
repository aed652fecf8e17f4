package consoletest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// Names used by the shared state, for assertions.
const (
	SharedSetName        = "san"
	SharedVG             = "shared"
	SharedLUN            = "/dev/disk/by-id/wwn-0x600a0b80001"
	SharedNodeOK         = "san-a" // lock managers run by the agent, host ID 1, watchdog, in the lockspace; created the VG
	SharedNodeNoWatchdog = "san-b" // the host's lock managers, host ID 2, no watchdog, in the lockspace
	SharedNodeLUNMissing = "san-c" // host ID 3; the LUN is not visible: Failed, not in the lockspace
	SharedNodeNotRunning = "san-d" // lock managers not running; reports host ID 3 too (a conflict with san-c)
	// FencingOff and FencingOn are the node agent's fencing sentences (nodeagent/shared/lockd).
	FencingOff = "no watchdog: a node that loses its leases is not reset (no fencing); use a host with a watchdog device and wdmd for production"
	FencingOn  = "watchdog in use: a node that cannot renew its leases is reset by its watchdog before other nodes may take them over (fencing)"
	// LUNMissingMessage is the agent's message on a node that does not see the LUN.
	LUNMissingMessage = "LUN " + SharedLUN + " of shared volume group " + SharedVG +
		" is not visible on this node: check its SAN zoning and multipath, then LVMS goes on"
	// NotRunningMessage is why san-d's lock managers do not run.
	NotRunningMessage = "sanlock exited with status 1: wdmd connect failed"
	// Volumes of the shared volume group (LogicalVolume names, as their PersistentVolumes), with their LV
	// names (volume IDs): SharedVolumeRWX is active Shared on san-a and san-b, SharedVolumeRWO Exclusive on
	// san-b, SharedVolumeIdle on no node.
	SharedVolumeRWX, SharedVolumeRWXID   = "pvc-5a1", "5a1c0de0-0000-4000-8000-000000000001"
	SharedVolumeRWO, SharedVolumeRWOID   = "pvc-5b2", "5b2c0de0-0000-4000-8000-000000000002"
	SharedVolumeIdle, SharedVolumeIdleID = "pvc-5c3", "5c3c0de0-0000-4000-8000-000000000003"
)

// Shared returns, in namespace ns, four nodes of the LVMNodeSet "san" sharing volume group "shared" on one
// LUN, one per state of the shared path (see the SharedNode constants). It is separate from Prepared so
// that the prepared state's counts stay as they are.
func Shared(ns string) []client.Object {
	spec := lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{{Name: SharedVG, AccessPolicy: lvmv2.AccessPolicyShared,
			DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
				{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{SharedLUN}}}}}}}},
		DeviceClasses: []lvmv2.DeviceClass{{Name: "san", Strategy: lvmv2.StrategyThick, VolumeGroup: SharedVG,
			StorageClass: &lvmv2.StorageClassTemplate{NamingPolicy: lvmv2.NamingNone}}},
	}
	set := &lvmv2.LVMNodeSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNodeSet"},
		ObjectMeta: metav1.ObjectMeta{Name: SharedSetName, Namespace: ns, Generation: 1},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "lvms.test/san", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}}},
			Provider: lvmv2.Provider{Strategy: lvmv2.ProviderManagedTopoLVM},
			Template: spec,
		},
	}
	joined := func(by string, active ...lvmv2.SharedActiveVolume) lvmv2.VolumeGroupStatus {
		// The agent's shared path lists no devices: it runs no device filters.
		return lvmv2.VolumeGroupStatus{Name: SharedVG, State: lvmv2.StateHealthy, Size: gi(500), Free: gi(470),
			Lockspace: lvmv2.LockspaceJoined, InitializedBy: by, ActiveVolumes: active}
	}
	rwx := lvmv2.SharedActiveVolume{Name: SharedVolumeRWXID, Mode: lvmv2.ActivationShared}
	rwo := lvmv2.SharedActiveVolume{Name: SharedVolumeRWOID, Mode: lvmv2.ActivationExclusive}
	nodes := []struct {
		name    string
		state   lvmv2.State
		locking lvmv2.SharedLockingStatus
		vg      lvmv2.VolumeGroupStatus
	}{
		{SharedNodeOK, lvmv2.StateReady, lvmv2.SharedLockingStatus{Mode: "Agent", HostID: 1, Watchdog: true, Fencing: FencingOn}, joined(SharedNodeOK, rwx)},
		{SharedNodeNoWatchdog, lvmv2.StateReady, lvmv2.SharedLockingStatus{Mode: "Host", HostID: 2, Fencing: FencingOff}, joined(SharedNodeOK, rwx, rwo)},
		{SharedNodeLUNMissing, lvmv2.StateFailed, lvmv2.SharedLockingStatus{Mode: "Agent", HostID: 3, Watchdog: true, Fencing: FencingOn},
			lvmv2.VolumeGroupStatus{Name: SharedVG, State: lvmv2.StateFailed, Message: LUNMissingMessage, Lockspace: lvmv2.LockspaceNotJoined}},
		{SharedNodeNotRunning, lvmv2.StateProgressing, lvmv2.SharedLockingStatus{Mode: "NotRunning", HostID: 3, Fencing: FencingOff, Message: NotRunningMessage},
			lvmv2.VolumeGroupStatus{Name: SharedVG, State: lvmv2.StateProgressing, Lockspace: lvmv2.LockspaceNotJoined,
				Message: "waiting for sanlock and lvmlockd (NotRunning): " + NotRunningMessage}},
	}
	objs := []client.Object{set}
	for _, n := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
			Labels: map[string]string{"kubernetes.io/hostname": n.name, "lvms.test/san": "true"}}})
		st := lvmv2.LVMNodeStatus{State: n.state, ObservedGeneration: 1, VolumeGroups: []lvmv2.VolumeGroupStatus{n.vg},
			DeviceClasses: []lvmv2.DeviceClassStatus{{Name: "san", VolumeGroup: SharedVG, State: n.vg.State}},
			SharedLocking: ptr.To(n.locking)}
		if n.state != lvmv2.StateReady {
			st.Message = "volume group " + SharedVG + ": " + n.vg.Message
		}
		objs = append(objs, &lvmv2.LVMNode{
			TypeMeta: metav1.TypeMeta{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNode"},
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Namespace: ns, Generation: 1, CreationTimestamp: metav1.NewTime(At.Add(-time.Hour)),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNodeSet", Name: SharedSetName, Controller: ptr.To(true)}}},
			Spec:   spec,
			Status: st,
		})
	}
	return append(objs, sharedVolumes()...)
}

// sharedVolumes are the volumes of the shared driver in the shared volume group: LogicalVolumes without a
// node, with the annotations the operator sets, and their PersistentVolumes.
func sharedVolumes() []client.Object {
	var objs []client.Object
	for _, v := range []struct {
		name, id string
		size     int64
		mode     corev1.PersistentVolumeAccessMode
	}{
		{SharedVolumeRWX, SharedVolumeRWXID, 10, corev1.ReadWriteMany},
		{SharedVolumeRWO, SharedVolumeRWOID, 10, corev1.ReadWriteOnce},
		{SharedVolumeIdle, SharedVolumeIdleID, 10, corev1.ReadWriteOnce},
	} {
		objs = append(objs, &topolvmv1.LogicalVolume{
			ObjectMeta: metav1.ObjectMeta{Name: v.name, Annotations: map[string]string{
				driver.SharedVolumeGroupAnnotation: SharedVG, driver.SharedWorkerAnnotation: SharedNodeOK}},
			Spec:   topolvmv1.LogicalVolumeSpec{Name: v.name, DeviceClass: "san", Size: *gi(v.size)},
			Status: topolvmv1.LogicalVolumeStatus{VolumeID: v.id, CurrentSize: gi(v.size)},
		}, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: v.name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *gi(v.size)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{v.mode},
				VolumeMode:                    ptr.To(corev1.PersistentVolumeBlock),
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              "san-shared",
				PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver.SharedDriver, VolumeHandle: v.id}},
			},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable}})
	}
	return objs
}
