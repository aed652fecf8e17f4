package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

// Finalizers the operator puts on the objects it reconciles. Each one guards a teardown the operator does
// before the object may go.
const (
	// NodeSetFinalizer is on every LVMNodeSet: deletion waits until no PVC uses its StorageClasses and every
	// node agent has removed the set's volume groups (or reported that data remains).
	NodeSetFinalizer = "lvm.topolvm.io/lvmnodeset"
	// ClusterFinalizer is on every LVMCluster (the name LVMS uses, so clusters upgraded from LVMS keep it).
	ClusterFinalizer = "lvmcluster.topolvm.io"
)

// Labels the operator puts on what it generates.
const (
	// ManagedByLabel marks every object the operator generates; value ManagedByValue.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel.
	ManagedByValue = "lvms-operator"

	// nodeSetLabelPrefix is the prefix of the per-set label on LVMNodes (see NodeSetLabel).
	nodeSetLabelPrefix = "nodeset.lvm.topolvm.io/"
	// NodeSetLabelValue is the value of every NodeSetLabel.
	NodeSetLabelValue = "true"

	// OwnerKindLabel, OwnerNamespaceLabel and OwnerNameLabel name the LVMNodeSet or LVMCluster a
	// cluster-scoped object (StorageClass, VolumeSnapshotClass) was generated for. Cluster-scoped objects
	// cannot carry owner references to namespaced owners, so these labels are how they are found, watched and
	// pruned.
	OwnerKindLabel      = "lvm.topolvm.io/owner-kind"
	OwnerNamespaceLabel = "lvm.topolvm.io/owner-namespace"
	OwnerNameLabel      = "lvm.topolvm.io/owner-name"
	// DeviceClassLabel names the device class a StorageClass or VolumeSnapshotClass serves.
	DeviceClassLabel = "lvm.topolvm.io/device-class"

	// ComponentLabel and its values mark the node agent's workload objects.
	ComponentLabel     = "app.kubernetes.io/component"
	ComponentNodeAgent = "node-agent"
	// NameLabel is the app name label of the node agent's pods.
	NameLabel = "app.kubernetes.io/name"
	// AppName is the value of NameLabel.
	AppName = "lvms"
)

// Owner kinds as they appear in OwnerKindLabel.
const (
	KindNodeSet = "LVMNodeSet"
	KindCluster = "LVMCluster"
)

// KeepStorage reports whether annotations carry KeepStorageOnDeleteAnnotation: "true".
func KeepStorage(annotations map[string]string) bool {
	return annotations[KeepStorageOnDeleteAnnotation] == "true"
}

// HandedOverNodes parses an LVMNodeSet's HandedOverNodesAnnotation: the node names, blanks dropped.
func HandedOverNodes(annotations map[string]string) []string {
	var out []string
	for _, f := range strings.Split(annotations[HandedOverNodesAnnotation], ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Annotations with a meaning to the operator.
const (
	// MigratedFromAnnotation on an LVMNodeSet names the LVMCluster (same namespace) it replaces. While it is
	// set, nodes both select are not a conflict: they stay managed by the LVMCluster until handed over.
	// Written by `lvms migrate`; documented in README.md ("Who manages a node").
	MigratedFromAnnotation = "lvm.topolvm.io/migrated-from"
	// HandedOverNodesAnnotation on an LVMNodeSet lists (comma-separated) the nodes the LVMCluster named by
	// MigratedFromAnnotation has handed over: the LVMCluster stops managing them (its LVMVolumeGroups exclude
	// them) and the set manages them. Nodes are added one at a time by migration once the v2 status of the
	// node matches what v1 reported.
	HandedOverNodesAnnotation = "lvm.topolvm.io/handed-over-nodes"
	// KeepStorageOnDeleteAnnotation ("true") on an LVMCluster or an LVMNodeSet changes its teardown so that
	// nothing on the disks is asked to go: volume groups, volumes and the StorageClasses and
	// VolumeSnapshotClasses stay, and the teardown does not wait for the volumes to be deleted. It exists for
	// `lvms migrate`, whose last step removes the LVMCluster (and whose rollback removes the sets) after an
	// LVMNodeSet took the storage over. An LVMCluster marked so waits until it manages no node (every node
	// handed over), because a node it still manages would lose its lvmd entries; an LVMNodeSet withdraws its
	// part of each LVMNode before deleting it, so no node agent sees a deleted volume group. Any other value
	// is today's teardown. Documented in README.md ("Migrating from LVMCluster").
	KeepStorageOnDeleteAnnotation = "lvm.topolvm.io/keep-storage-on-delete"
	// MigrationStateAnnotation holds `lvms migrate apply`'s progress record (JSON, see migrate/record):
	// on the LVMCluster while it exists, copied onto the sets before the LVMCluster is removed. The operator
	// does not read it; it is named here so that every annotation with a meaning is in one place.
	MigrationStateAnnotation = "lvm.topolvm.io/migration-state"
	// DefaultClassAnnotation is the Kubernetes annotation that makes a StorageClass the default.
	DefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
	// DefaultSnapshotClassAnnotation makes a VolumeSnapshotClass the default for its driver.
	DefaultSnapshotClassAnnotation = "snapshot.storage.kubernetes.io/is-default-class"
	// DescriptionAnnotation is shown by consoles next to a StorageClass.
	DescriptionAnnotation = "description"
)

// Field owners used for server-side apply.
const (
	// MigrateFieldOwner is the field manager of `lvms migrate` (the sets it creates, the annotations it writes).
	MigrateFieldOwner = "lvms-migrate"
	// FieldOwner is the operator's field manager for objects it alone writes.
	FieldOwner = "lvms-operator"
	// nodeSetFieldOwnerPrefix prefixes the per-set field manager on LVMNodes (see NodeSetFieldOwner).
	nodeSetFieldOwnerPrefix = "lvms-operator/nodeset/"
)

// NodeSetFieldOwner is the field manager a set uses on the LVMNodes it shares with other sets: server-side
// apply then merges the volume groups and device classes of several sets on one LVMNode and removes exactly
// a set's own entries when it stops selecting the node. The set's UID keeps it unique and short.
func NodeSetFieldOwner(uid string) string { return nodeSetFieldOwnerPrefix + uid }

// IsNodeSetFieldOwner reports whether a field manager is one of NodeSetFieldOwner's.
func IsNodeSetFieldOwner(manager string) bool {
	return strings.HasPrefix(manager, nodeSetFieldOwnerPrefix)
}

// Names of what the operator generates.
const (
	// SharedCSIDriverName is the driver of volumes on shared volume groups (no node topology).
	SharedCSIDriverName = driver.SharedDriver
	// NodeAgent names the node agent DaemonSet and its ServiceAccount (whose RBAC, admission policy and
	// SecurityContextConstraints are static manifests in deploy/nodeagent, by the same name).
	NodeAgent = "lvms-node-agent"
	// NodeAgentMetricsCertSecret holds the node agents' metrics serving certificate (optional: without it
	// they sign their own). The Service deploy/nodeagent/service.yaml asks OpenShift's service CA for it.
	NodeAgentMetricsCertSecret = "lvms-node-agent-metrics-cert"
	// DefaultClassPrefix is the StorageClass/VolumeSnapshotClass name prefix (lvms-<device class>).
	DefaultClassPrefix = "lvms"
	// FSTypeParameter is the CSI StorageClass parameter for the filesystem type.
	FSTypeParameter = "csi.storage.k8s.io/fstype"
)

// Ports of the node agent's endpoints besides diagnostics (8443), as deploy/nodeagent/service.yaml names them.
const (
	// NodeAgentMetricsPort serves Prometheus metrics over HTTPS with token authentication.
	NodeAgentMetricsPort int32 = 8444
	// NodeAgentHealthPort serves /healthz and /readyz over plain HTTP for the kubelet's probes.
	NodeAgentHealthPort int32 = 8081
)

// DefaultNamespace is the operator namespace when neither --namespace nor POD_NAMESPACE is set.
const DefaultNamespace = "openshift-storage"

// NodeSetLabel is the label key every LVMNode carries for each LVMNodeSet whose template it holds
// (nodeset.lvm.topolvm.io/<set name>: "true"), so `kubectl get lvmnodes -l nodeset.lvm.topolvm.io/<set>`
// lists a set's nodes. Several sets may share a node when their volume groups and devices differ, so one
// key per set rather than one label with the set's name. Set names longer than a label name allows (63) are
// cut and suffixed with a hash of the full name.
func NodeSetLabel(setName string) string {
	const maxName = 63
	if len(setName) <= maxName {
		return nodeSetLabelPrefix + setName
	}
	sum := sha256.Sum256([]byte(setName))
	h := hex.EncodeToString(sum[:])[:10]
	cut := strings.TrimRight(setName[:maxName-len(h)-1], ".-_")
	return nodeSetLabelPrefix + cut + "-" + h
}

// AgentGOGC is the node agent's GOGC: its live heap is small (about 8 MiB on 16 devices) and it allocates
// little between resyncs, so collecting at 25% growth instead of Go's 100% keeps about 4 MiB less resident
// for a few more short collections.
const AgentGOGC = "25"

// OperatorGOGC is the operator's GOGC, set in deploy/operator/deployment.yaml: collecting at 50% heap
// growth keeps the heap of a 5,000-node cluster's caches (a 110 MiB live heap) within its GOMEMLIMIT
// (192MiB, the manifest says how it was measured).
const OperatorGOGC = "50"
