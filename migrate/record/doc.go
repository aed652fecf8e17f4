// Package record is the progress record of a v1alpha1 -> v2alpha1 migration as it lives in the API: the
// JSON value of names.MigrationStateAnnotation, on the LVMCluster while it exists and copied onto its
// LVMNodeSets before it is removed. migrate/handover writes and resumes from it; diagnostics/analyze reads
// it from a support bundle to report a migration left half-way. It holds the types, the steps in order,
// and the one parser both use, and does no I/O.
package record
