// Package collect gathers a support bundle from a cluster: LVMS's objects of every kind and API version,
// LogicalVolumes (both groups), the PersistentVolumes, claims and CSIStorageCapacities of LVMS's drivers,
// StorageClasses, VolumeSnapshotClasses, CSIDrivers, CSINodes, Nodes, the relevant events, the operator's
// and node agents' pods with their logs (current and previous, within a since window), and each node
// agent's own view from its diagnostics endpoint (package nodeagent/diagnostics).
//
// Every collector fails forward: its error is recorded in the manifest and the others go on. The whole
// collection is bounded in time (Options.Timeout) and size (Options.MaxBytes); everything written passes
// through the redactor, Secrets are never read, and the analyzers' findings are written with the bundle.
package collect
