package record

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/lvms-dev/lvms/operator/names"
)

// Step is how far a migration got. Steps only move forward in apply and back in rollback.
type Step string

// Steps in order.
const (
	// StepMarked: the LVMCluster carries the keep mark and this record (with the before snapshot).
	StepMarked Step = "Marked"
	// StepSetsCreated: the LVMNodeSets exist; no node is handed over yet.
	StepSetsCreated Step = "SetsCreated"
	// StepNodesHandedOver: every node's LVMNode status matched what v1 reported.
	StepNodesHandedOver Step = "NodesHandedOver"
	// StepClassesAdopted: the sets own the StorageClasses and VolumeSnapshotClasses (same objects).
	StepClassesAdopted Step = "ClassesAdopted"
	// StepClusterRemoved: the LVMCluster's removal was asked for. There is no way back from here.
	StepClusterRemoved Step = "ClusterRemoved"
)

var stepOrder = []Step{StepMarked, StepSetsCreated, StepNodesHandedOver, StepClassesAdopted, StepClusterRemoved}

// Steps returns the steps in order.
func Steps() []Step { return slices.Clone(stepOrder) }

// Reached reports whether s is at or after want.
func (s Step) Reached(want Step) bool {
	return slices.Index(stepOrder, s) >= slices.Index(stepOrder, want)
}

// Version is the Record format; a record of another version is refused, never guessed at.
const Version = 1

// MaxBytes keeps the record well under the 256 KiB the API server allows for all annotations.
const MaxBytes = 200 << 10

// Record is the migration's progress as it lives in the API (names.MigrationStateAnnotation), so apply can
// resume from any machine and verify can compare with what v1 showed.
type Record struct {
	Version int `json:"version"`
	// Cluster is the LVMCluster's name (same namespace as the sets).
	Cluster string `json:"cluster"`
	Step    Step   `json:"step"`
	// Started is when apply first ran: a device wiped after it means adoption failed. The record keeps no
	// later time.
	Started time.Time `json:"started"`
	// Sets are the planned LVMNodeSets, sorted.
	Sets []string `json:"sets"`
	// Nodes the LVMCluster managed at the start, sorted: the hand-over order. HandedOver are those whose
	// LVMNode status matched, in that order.
	Nodes      []string `json:"nodes"`
	HandedOver []string `json:"handedOver,omitempty"`
	// Before is what v1 showed at the start.
	Before Snapshot `json:"before"`
}

// Encode returns the record as the annotation value.
func (r *Record) Encode() (string, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode the migration record: %w", err)
	}
	if len(data) > MaxBytes {
		return "", fmt.Errorf("the migration record of LVMCluster %s is %d KiB, more than the %d KiB an annotation can safely hold (too many volumes to record); migrate with fewer volumes or by hand",
			r.Cluster, len(data)>>10, MaxBytes>>10)
	}
	return string(data), nil
}

// Error is a names.MigrationStateAnnotation value that is not a record this build understands.
type Error struct {
	// Object is "LVMCluster ns/name" or "LVMNodeSet ns/name".
	Object string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("annotation %s on %s is not a valid migration record (%v). %s", names.MigrationStateAnnotation, e.Object, e.Err, e.Fix())
}

func (e *Error) Unwrap() error { return e.Err }

// Fix says how to recover from a record that cannot be read: restore it, or start the migration over.
func (e *Error) Fix() string {
	return fmt.Sprintf("Only lvms migrate writes it: restore it from a backup, or, if no node was handed over yet (no LVMNodeSet lists one in %s), remove it and %s from the LVMCluster and delete the sets that name it in %s, then run lvms migrate apply again",
		names.HandedOverNodesAnnotation, names.KeepStorageOnDeleteAnnotation, names.MigratedFromAnnotation)
}

// Decode reads the record from an object's annotations; nil when there is none. object names the object
// in an *Error ("LVMCluster ns/name").
func Decode(object string, annotations map[string]string) (*Record, error) {
	raw, ok := annotations[names.MigrationStateAnnotation]
	if !ok {
		return nil, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, &Error{Object: object, Err: err}
	}
	if err := r.validate(); err != nil {
		return nil, &Error{Object: object, Err: err}
	}
	return &r, nil
}

func (r *Record) validate() error {
	switch {
	case r.Version != Version:
		return fmt.Errorf("version %d, this build reads version %d", r.Version, Version)
	case !slices.Contains(stepOrder, r.Step):
		return fmt.Errorf("unknown step %q", r.Step)
	case r.Cluster == "":
		return fmt.Errorf("no cluster name")
	case !slices.IsSorted(r.Nodes) || !slices.IsSorted(r.Sets):
		return fmt.Errorf("nodes or sets are not sorted")
	}
	for i, n := range r.HandedOver {
		if i >= len(r.Nodes) || r.Nodes[i] != n {
			return fmt.Errorf("handedOver %v is not a prefix of nodes %v", r.HandedOver, r.Nodes)
		}
	}
	return nil
}
