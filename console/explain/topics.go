package explain

import "fmt"

// Topics are differences the console points out between desired and actual state.
const (
	// TopicDeviceNotReported: the spec names a device, the agent lists it neither as included nor excluded.
	TopicDeviceNotReported = "DeviceNotReported"
	// TopicUnexpectedDevice: a physical volume of the volume group that the spec does not name.
	TopicUnexpectedDevice = "UnexpectedDevice"
	// TopicVolumeGroupNotReported: the spec has a volume group the node agent does not report.
	TopicVolumeGroupNotReported = "VolumeGroupNotReported"
	// TopicUnexpectedVolumeGroup: the agent reports a volume group the spec does not have.
	TopicUnexpectedVolumeGroup = "UnexpectedVolumeGroup"
	// TopicVolumeGroupUnhealthy: the agent reports the volume group Degraded, Failed or Missing.
	TopicVolumeGroupUnhealthy = "VolumeGroupUnhealthy"
	// TopicStaleStatus: the agent has not yet acted on the latest spec (observedGeneration < generation).
	TopicStaleStatus = "StaleStatus"
	// TopicNoStatus: an LVMNode or node status object with no status at all.
	TopicNoStatus = "NoStatus"
	// TopicNodeMissing: an LVMNode or LVMVolumeGroupNodeStatus whose Kubernetes Node does not exist.
	TopicNodeMissing = "NodeMissing"
	// TopicNodeNotSelected: a node with LVMS state that no LVMNodeSet or LVMCluster selects any more.
	TopicNodeNotSelected = "NodeNotSelected"
	// TopicThinMetadataHigh: thin pool metadata usage at or above the warning threshold.
	TopicThinMetadataHigh = "ThinPoolMetadataHigh"
	// TopicThinDataHigh: thin pool data usage at or above the warning threshold.
	TopicThinDataHigh = "ThinPoolDataHigh"
	// TopicThinPoolNotReported: a thin device class's pool is not among the volumes the agent reports.
	TopicThinPoolNotReported = "ThinPoolNotReported"
	// TopicStorageClassMissing: a device class's StorageClass is not in the cluster.
	TopicStorageClassMissing = "StorageClassMissing"
	// TopicStorageClassMismatch: a StorageClass of that name exists but does not point at the device class.
	TopicStorageClassMismatch = "StorageClassMismatch"
	// TopicSnapshotClassMissing: a thin device class's VolumeSnapshotClass is not in the cluster.
	TopicSnapshotClassMissing = "SnapshotClassMissing"
	// TopicVolumeError: a LogicalVolume reports an error.
	TopicVolumeError = "VolumeError"
	// TopicClaimPending: a claim of an LVMS class without a volume yet.
	TopicClaimPending = "ClaimPending"
	// TopicVolumeOrphaned: a LogicalVolume without a PersistentVolume.
	TopicVolumeOrphaned = "VolumeOrphaned"
	// TopicOverprovisioned: volumes promise more than the pool or volume group holds.
	TopicOverprovisioned = "Overprovisioned"
	// TopicLockManagersNotRunning: a node with a shared volume group whose sanlock or lvmlockd does not run.
	TopicLockManagersNotRunning = "LockManagersNotRunning"
	// TopicLockspaceNotJoined: a node is not in a shared volume group's lockspace.
	TopicLockspaceNotJoined = "LockspaceNotJoined"
	// TopicSharedLUNMissing: a LUN of a shared volume group is not visible on a node.
	TopicSharedLUNMissing = "SharedLUNMissing"
	// TopicHostIDConflict: two nodes report the same sanlock host ID.
	TopicHostIDConflict = "HostIDConflict"
	// TopicNoWatchdog: sanlock runs without a watchdog, so a node that loses its leases is not fenced.
	TopicNoWatchdog = "NoWatchdog"
)

// lockstop leaves every shared volume group's lockspace on a node. lvm needs use_lvmlockd for it, which the
// node agent passes per command instead of setting it in the host's lvm.conf.
const lockstop = "vgchange --config 'global{use_lvmlockd=1}' --lockstop"

// Thin pool usage thresholds, in percent. A device class sets its own (thin dataUsageThreshold,
// metadataUsageThreshold; the node agent reports them with the pool's usage); these are the defaults for a
// status that does not say. Metadata stops earlier than data: a full metadata volume stops the whole pool.
// A pool is nearly full ThinNearMargin points below its threshold (the node agent's ThinPoolNearlyFull
// event); at the threshold new volumes are refused.
const (
	ThinDataDefaultThreshold     = 90.0
	ThinMetadataDefaultThreshold = 75.0
	ThinNearMargin               = 10.0
)

// ThinThreshold is the threshold of kind "data" or "metadata": the reported one, or the default when the
// status has none (0).
func ThinThreshold(kind string, reported float64) float64 {
	switch {
	case reported > 0:
		return reported
	case kind == "metadata":
		return ThinMetadataDefaultThreshold
	}
	return ThinDataDefaultThreshold
}

// Topic explains a difference. detail, when set, is added to Why (the agent's message, the names involved).
func Topic(topic, detail string, c Context) Explanation {
	e, ok := topics[topic]
	if !ok {
		return Explanation{Code: topic, Title: topic, Why: detail, Severity: Warning}
	}
	x := e.render(topic, c)
	if detail != "" {
		x.Why = x.Why + " " + detail
	}
	return x
}

// Levels of ThinUsage, which explains usage where the device class's thresholds are not known (a support
// bundle's LVM report).
const (
	ThinMetadataWarnPercent = 75.0
	ThinDataWarnPercent     = 80.0
	ThinCriticalPercent     = 90.0
)

// ThinUsage explains thin pool usage for kind "data" or "metadata" at fixed levels (warning from
// ThinMetadataWarnPercent or ThinDataWarnPercent, error from ThinCriticalPercent); ok is false below.
// Where the device class's thresholds are reported, use ThinUsageAt.
func ThinUsage(kind string, percent float64, c Context) (Explanation, bool) {
	warn := ThinDataWarnPercent
	if kind == "metadata" {
		warn = ThinMetadataWarnPercent
	}
	if percent < warn {
		return Explanation{}, false
	}
	x := thinTopic(kind, c)
	x.Why = fmt.Sprintf("The thin pool's %s is %.1f%% full. %s", kind, percent, x.Why)
	if percent >= ThinCriticalPercent {
		x.Severity = Error
	}
	return x, true
}

func thinTopic(kind string, c Context) Explanation {
	if kind == "metadata" {
		return Topic(TopicThinMetadataHigh, "", c)
	}
	return Topic(TopicThinDataHigh, "", c)
}

// ThinUsageAt explains thin pool usage for kind "data" or "metadata" against its threshold: a warning from
// ThinNearMargin points below it, an error at it (new volumes are refused); ok is false below.
func ThinUsageAt(kind string, percent, threshold float64, c Context) (Explanation, bool) {
	if percent < threshold-ThinNearMargin {
		return Explanation{}, false
	}
	// The sentence is ThinUsage's (support bundle analyses quote it); the threshold is in the finding's
	// Desired and on the usage bar.
	x := thinTopic(kind, c)
	x.Why = fmt.Sprintf("The thin pool's %s is %.1f%% full. %s", kind, percent, x.Why)
	if percent >= threshold {
		x.Severity = Error
	}
	return x, true
}

var topics = map[string]entry{
	TopicDeviceNotReported: {
		title:    "Desired device not reported",
		severity: Warning,
		why:      "The spec names {device} for volume group {vg}, but the node agent on {node} lists it neither as used nor as excluded.",
		next: []Step{
			{Text: "If the status is stale (its observedGeneration is behind the object's generation), wait for the agent's next pass."},
			{Text: "Check that the node agent runs on {node} and read its log."},
		},
	},
	TopicUnexpectedDevice: {
		title:    "Device in the volume group but not in the spec",
		severity: Warning,
		why:      "{device} is a physical volume of {vg} on {node}, but the device selector does not name it. It was added by hand, or removed from the spec while it still holds data.",
		next: []Step{
			{Text: "If it belongs there, add it to the selector so the spec says so."},
			{Text: "LVMS does not remove physical volumes that hold extents. To take it out, move the data off and reduce the volume group by hand.",
				Command: "pvmove {device}; vgreduce {vg} {device}"},
		},
	},
	TopicVolumeGroupNotReported: {
		title:    "Desired volume group not reported",
		severity: Error,
		why:      "The spec has volume group {vg}, but the node agent on {node} does not report it.",
		next: []Step{
			{Text: "Check that the node agent runs on {node}, and read its log and the events below."},
		},
	},
	TopicUnexpectedVolumeGroup: {
		title:    "Reported volume group not in the spec",
		severity: Warning,
		why:      "The node agent on {node} reports volume group {vg}, which the spec no longer has. It is being removed, or its removal is blocked by volumes in it.",
		next: []Step{
			{Text: "List the LogicalVolumes on this node's device classes (Volumes page): volumes still in use keep the volume group."},
		},
	},
	TopicVolumeGroupUnhealthy: {
		title:    "Volume group not healthy",
		severity: Error,
		why:      "The node agent reports volume group {vg} on {node} as not healthy.",
		next: []Step{
			{Text: "Open the devices marked as differing below: each has its own explanation."},
			{Text: "Read the node agent's log on {node} for the failing command."},
		},
	},
	TopicStaleStatus: {
		title:    "Status is older than the spec",
		severity: Info,
		why:      "The spec changed after the node agent last reported (observedGeneration is lower than the generation), so the actual state may not reflect the latest change yet.",
		next: []Step{
			{Text: "Wait a few seconds; the page refreshes by itself. If it stays behind, check that the node agent on {node} runs."},
		},
	},
	TopicNoStatus: {
		title:    "No status from the node agent",
		severity: Error,
		why:      "Nothing has been reported for {node} yet: the node agent has not run there, or cannot write its status.",
		next: []Step{
			{Text: "Check that a node agent pod runs on {node}; its tolerations must allow the node's taints.", Command: "kubectl get pods -A -o wide --field-selector spec.nodeName={node}"},
		},
	},
	TopicNodeMissing: {
		title:    "Kubernetes Node does not exist",
		severity: Warning,
		why:      "There is LVMS state for {node}, but no Node object of that name: the node was removed from the cluster or renamed.",
		next: []Step{
			{Text: "If the node is gone for good, the operator removes its LVMS objects; volumes that lived on it are lost with its disks."},
		},
	},
	TopicNodeNotSelected: {
		title:    "No LVMNodeSet or LVMCluster selects this node",
		severity: Warning,
		why: "There is LVMS state for {node}, but the node selector and tolerations of every LVMNodeSet and LVMCluster leave it out: " +
			"its labels or taints changed, or the set that selected it was changed or deleted.",
		next: []Step{
			{Text: "If the node should provide storage, label it to match a set's node selector, or add a toleration for its taints."},
			{Text: "If not, the operator removes its volume groups once no volume uses them; until then its state stays here."},
		},
	},
	TopicThinMetadataHigh: {
		title:    "Thin pool metadata almost full",
		severity: Warning,
		why: "When the metadata of a thin pool fills up, the pool switches to read-only and every volume in it fails writes, " +
			"even if data space is left. Many snapshots and small random writes use metadata quickly.",
		next: []Step{
			{Text: "Grow the metadata: raise thin.metadataSize on the device class (it may grow, never shrink) and the node agent extends it."},
			{Text: "Or extend it by hand on {node}.", Command: "lvextend --poolmetadatasize +1G {vg}/<pool>"},
			{Text: "Delete VolumeSnapshots that are no longer needed."},
		},
	},
	TopicThinDataHigh: {
		title:    "Thin pool data almost full",
		severity: Warning,
		why:      "When a thin pool's data space fills up, writes to every volume in it block or fail. Volumes can promise more than the pool holds (overprovisioning).",
		next: []Step{
			{Text: "Add a device to the volume group (extend the selector) so the pool can grow, or delete volumes and snapshots that are no longer needed."},
			{Text: "Lower thin.overprovisionRatio so new volumes cannot promise more than the pool can hold."},
		},
	},
	TopicThinPoolNotReported: {
		title:    "Thin pool not reported",
		severity: Warning,
		why:      "A thin device class allocates from a pool in {vg}, but the node agent on {node} does not report that pool: it is not created yet, or creating it failed.",
		next: []Step{
			{Text: "Read the node agent's log on {node}; a full volume group or a kernel without the thin-pool device-mapper target are common causes.",
				Command: "lvs -a {vg}; dmsetup targets"},
		},
	},
	TopicStorageClassMissing: {
		title:    "StorageClass missing",
		severity: Error,
		why:      "The device class should have a StorageClass, but there is none of that name in the cluster: PVCs that name it stay Pending.",
		next: []Step{
			{Text: "The operator creates and recreates it. Check that the operator runs and read its log.", Command: "kubectl get storageclass"},
			{Text: "If you want no StorageClass for this device class, set storageClass.namingPolicy: None."},
		},
	},
	TopicStorageClassMismatch: {
		title:    "StorageClass points elsewhere",
		severity: Error,
		why:      "A StorageClass of the expected name exists but does not provision from this device class (another provisioner or another topolvm.io/device-class).",
		next: []Step{
			{Text: "Another tool or person created a StorageClass of that name. Rename one of them: use storageClass.namingPolicy Explicit with another name."},
		},
	},
	TopicSnapshotClassMissing: {
		title:    "VolumeSnapshotClass missing",
		severity: Warning,
		why:      "The thin device class should have a VolumeSnapshotClass, but there is none of that name: VolumeSnapshots naming it fail.",
		next: []Step{
			{Text: "Check that the VolumeSnapshotClass CRD (external-snapshotter) is installed, then check the operator's log.",
				Command: "kubectl get crd volumesnapshotclasses.snapshot.storage.k8s.io"},
		},
	},
	TopicVolumeError: {
		title:    "Volume reports an error",
		severity: Error,
		why:      "The LogicalVolume carries an error from the node agent.",
		next: []Step{
			{Text: "Read the message; common causes are too little free space in the volume group or thin pool and a missing device class on the node."},
		},
	},
	TopicClaimPending: {
		title:    "Claim pending",
		severity: Info,
		why:      "The claim has no volume yet.",
		next: []Step{
			{Text: "A claim of a class that binds on first consumer gets its volume once a pod that uses it is scheduled; otherwise read the claim's events.",
				Command: "kubectl describe pvc -n <namespace> <claim>"},
		},
	},
	TopicVolumeOrphaned: {
		title:    "Volume without a PersistentVolume",
		severity: Warning,
		why:      "The LogicalVolume has no PersistentVolume: it is being created or deleted, or was left behind and still takes space.",
		next: []Step{
			{Text: "If it stays like this, check the PVC it was created for; delete the LogicalVolume only when its data is not needed."},
		},
		warning: "Deleting a LogicalVolume removes the LV and its data on the node.",
	},
	TopicOverprovisioned: {
		title:    "Overprovisioned",
		severity: Info,
		why:      "The volumes on this device class promise more space than the thin pool holds. That is how thin provisioning works, but the pool fills up if they all write.",
		next: []Step{
			{Text: "Watch the thin pool's data usage; lower thin.overprovisionRatio to limit how far new volumes may go."},
		},
	},
	TopicLockManagersNotRunning: {
		title:    "Lock managers not running",
		severity: Error,
		why: "Shared volume groups need sanlock and lvmlockd on every node that uses them, and they do not run on {node}: " +
			"the node can neither create nor join a shared volume group, nor use one it joined.",
		next: []Step{
			{Text: "Read the reason the agent gives and its log on {node}. In mode Agent the node agent runs sanlock and lvmlockd itself " +
				"and restarts them with a backoff; in mode Host they are the host's services, and the host must keep them running."},
			{Text: "See whether they answer." + onNode, Command: "sanlock client status; lvmlockctl --info"},
			{Text: "If the agent says the host ID went to another node, leave every shared lockspace on {node}, then restart its node agent: " +
				"it claims a free host ID." + onNode, Command: lockstop},
		},
	},
	TopicLockspaceNotJoined: {
		title:    "Not in the shared volume group's lockspace",
		severity: Error,
		why: "{node} has not joined the sanlock lockspace of shared volume group {vg}, so it cannot take locks in it: " +
			"no volume of {vg} can be used on this node.",
		next: []Step{
			{Text: "Read the agent's message. While another node creates the volume group, or sanlock acquires the host ID " +
				"(the first attempts fail for a minute or two), the agent retries by itself."},
			{Text: "If it stays out, see the lockspaces and the lock managers." + onNode, Command: "sanlock client status; lvmlockctl --info"},
			{Text: "A LUN that is not blank (the agent creates a shared volume group only on a blank one), or named by a path " +
				"that differs between nodes, keeps it out for good: the message says which."},
		},
	},
	TopicSharedLUNMissing: {
		title:    "Shared LUN not visible on the node",
		severity: Error,
		why: "A LUN of shared volume group {vg} is not visible on {node}, so the node cannot join the volume group: " +
			"every node of a shared volume group must see its LUNs, under the paths the spec names.",
		next: []Step{
			{Text: "Check that the LUN reaches the node: SAN zoning and LUN masking, the host's FC or iSCSI session, and multipath." + onNode,
				Command: "lsblk -o NAME,WWN,SIZE,TYPE; multipath -ll; ls -l /dev/disk/by-id/"},
			{Text: "Once the LUN appears under the path the spec names, the node agent goes on by itself; the other nodes are not affected."},
		},
	},
	TopicHostIDConflict: {
		title:    "Host ID used by two nodes",
		severity: Error,
		why: "Nodes that share a volume group need distinct sanlock host IDs, and {node} reports the same host ID as another node: " +
			"sanlock keeps one of them out of the lockspaces, or, if both get in, their leases overwrite each other and the locks " +
			"no longer keep the nodes apart.",
		next: []Step{
			{Text: "Each host ID is claimed through one Lease, lvms-host-id-<N> in the node agent's namespace, held by the node that owns it. " +
				"See which node holds it:",
				Command: "kubectl get leases -A -l lvm.topolvm.io/host-id -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,HOLDER:.spec.holderIdentity"},
			{Text: "On the node that does not hold the Lease, leave every shared lockspace, then restart its node agent: it claims a free " +
				"host ID. Do not delete or edit these Leases by hand: they are what keeps host IDs apart." + onNode, Command: lockstop},
		},
	},
	TopicNoWatchdog: {
		title:    "No watchdog: no fencing",
		severity: Warning,
		why: "sanlock on {node} runs without a watchdog, so nothing fences the node: if it stops renewing its leases (hung, or cut " +
			"off from the LUN) it is not reset, and other nodes may take its locks over while it can still write to the shared " +
			"volume groups. Fine for tests, not for production.",
		next: []Step{
			{Text: "Give the host a watchdog device (a hardware watchdog, or the softdog kernel module) and wdmd: the node agent uses wdmd " +
				"when it answers, and starts it itself when only /dev/watchdog exists." + onNode, Command: "ls -l /dev/watchdog*; systemctl status wdmd"},
			{Text: "sanlock takes the watchdog when it starts: once the device is there, drain {node}, leave its shared lockspaces and " +
				"restart its node agent, or reboot the node."},
		},
	},
}
