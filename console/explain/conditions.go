package explain

import (
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// Condition explains a condition that is not True (every LVMS condition is positive: True is healthy).
// reason and message are the condition's own; message is quoted in Why so nothing the controller said is
// lost. Unknown condition types still get an explanation from the message.
func Condition(condType, reason, message string, c Context) Explanation {
	e, ok := conditions[condType]
	if !ok {
		x := Explanation{Code: condType, Title: condType + " is not true", Severity: Warning,
			Why: orDefault(message, "The condition is not true and carries no message."),
			Next: []Step{{Text: "This console does not know condition " + condType + "; its message above is the best description. " +
				"Look at the events of the object for details."}}}
		return x
	}
	x := e.render(condType, c)
	if message != "" {
		x.Why = x.Why + " The controller says: \"" + message + "\" (reason " + orDefault(reason, "none") + ")."
	}
	return x
}

// v1alpha1 LVMCluster condition types (LVMS's), explained next to the v2alpha1 ones.
const (
	ConditionResourcesAvailable = "ResourcesAvailable"
	ConditionVolumeGroupsReady  = "VolumeGroupsReady"
)

// ConditionTypes lists the condition types this console explains.
func ConditionTypes() []string {
	return []string{lvmv2.ConditionVolumeGroupsHealthy, lvmv2.ConditionDeviceClassesHealthy, lvmv2.ConditionStorageClassesHealthy,
		lvmv2.ConditionLVMDConfigured, lvmv2.ConditionLVMNodesReady, lvmv2.ConditionProviderReady, lvmv2.ConditionNoConflicts,
		ConditionResourcesAvailable, ConditionVolumeGroupsReady}
}

const agentLogs = "Read the node agent's log on {node} for the failing command."

var conditions = map[string]entry{
	lvmv2.ConditionVolumeGroupsHealthy: {
		title:    "A volume group is not healthy",
		severity: Error,
		why:      "At least one volume group on {node} is missing, degraded or failed: a device it needs is absent or an LVM command failed.",
		next: []Step{
			{Text: "Open the node's volume groups marked as differing (its page in the console, or its LVMNode's status.volumeGroups): each missing or excluded device has its own explanation."},
			{Text: agentLogs},
		},
	},
	lvmv2.ConditionDeviceClassesHealthy: {
		title:    "A device class cannot provision",
		severity: Error,
		why:      "At least one device class on {node} cannot create volumes, usually because its volume group or thin pool is not ready.",
		next: []Step{
			{Text: "Fix the volume group first (see VolumeGroupsHealthy); the device class follows."},
			{Text: "For thin device classes, check the thin pool's data and metadata usage (the node's page in the console, or lvs on the node)."},
		},
	},
	lvmv2.ConditionStorageClassesHealthy: {
		title:    "A StorageClass or VolumeSnapshotClass is missing",
		severity: Warning,
		why:      "A class the device classes should have is not in the cluster, so PVCs naming it stay Pending.",
		next: []Step{
			{Text: "The operator recreates classes it owns: check that it runs and read its log.", Command: "kubectl get storageclass,volumesnapshotclass"},
			{Text: "If snapshot classes are missing, check that the VolumeSnapshotClass CRD (external-snapshotter) is installed."},
		},
	},
	lvmv2.ConditionLVMDConfigured: {
		title:    "lvmd.yaml is not configured",
		severity: Error,
		why:      "The node agent could not write lvmd.yaml for every device class on {node} (or, with external configuration, the host's file is missing or invalid), so the CSI driver cannot provision there.",
		next: []Step{
			{Text: "The node agent writes lvmd.yaml itself and adds a device class once its volume group (and thin pool) exist: fix those first (see VolumeGroupsHealthy and DeviceClassesHealthy)."},
			{Text: agentLogs},
		},
		nextExternal: []Step{
			{Text: "With configurationPolicy: ExternalConfiguration the host owns lvmd.yaml: fix the host file named in the message and validate it.", Command: "cat /etc/topolvm/lvmd.yaml"},
			{Text: agentLogs},
		},
	},
	lvmv2.ConditionLVMNodesReady: {
		title:    "Not every node of the set is ready",
		severity: Warning,
		why:      "At least one node the set selects is not Ready.",
		next:     []Step{{Text: "Open the nodes that are not Ready from the overview; each shows what differs."}},
	},
	lvmv2.ConditionProviderReady: {
		title:    "The CSI driver is not deployed",
		severity: Error,
		why:      "The CSI driver side of the set (node agent DaemonSet, CSIDriver, classes) is not ready, so volumes cannot be provisioned.",
		next: []Step{
			{Text: "Check the node agent pods and the operator's log.", Command: "kubectl get daemonset,pods -n <lvms namespace>"},
		},
	},
	lvmv2.ConditionNoConflicts: {
		title:    "Another set or LVMCluster claims the same storage",
		severity: Error,
		why:      "Another LVMNodeSet or an LVMCluster selects the same nodes, volume groups or devices. LVMS does not guess which one wins, so the conflicting parts are left alone.",
		next: []Step{
			{Text: "Narrow the nodeSelector or the device selectors so each node's volume groups and devices are claimed by one object only. The message names the other object."},
		},
	},
	ConditionResourcesAvailable: {
		title:    "The operator has not finished creating resources",
		severity: Warning,
		why:      "The operator could not create or update all the resources of the LVMCluster (node agent, CSI driver, classes).",
		next:     []Step{{Text: "Read the operator's log and the LVMCluster's events."}},
	},
	ConditionVolumeGroupsReady: {
		title:    "Volume groups are not ready on every node",
		severity: Error,
		why:      "At least one selected node reports a volume group of this LVMCluster that is not Ready.",
		next:     []Step{{Text: "Open the nodes marked as differing from the overview; each volume group row explains what is wrong."}},
	},
}
