package handover

import (
	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/operator/names"
)

// The record's types and steps live in migrate/record, which diagnostics/analyze reads too; these names
// keep this package's API as it was.
type (
	// Step is how far a migration got (record.Step).
	Step = record.Step
	// RecordError is an annotation value that is not a record this build understands (record.Error).
	RecordError = record.Error
	// Snapshot is the storage of the migrated nodes as the API shows it (record.Snapshot).
	Snapshot         = record.Snapshot
	NodeStorage      = record.NodeStorage
	VolumeGroup      = record.VolumeGroup
	LogicalVolume    = record.LogicalVolume
	PersistentVolume = record.PersistentVolume
	Class            = record.Class
)

// Steps in order (see record).
const (
	StepMarked          = record.StepMarked
	StepSetsCreated     = record.StepSetsCreated
	StepNodesHandedOver = record.StepNodesHandedOver
	StepClassesAdopted  = record.StepClassesAdopted
	StepClusterRemoved  = record.StepClusterRemoved
)

// Record is the migration's progress as it lives in the API (record.Record), with the annotation value it
// was read from or last written as, so that a write finding another value knows a second apply is running.
type Record struct {
	record.Record
	stored string
}

// decodeRecord reads the record from annotations; nil when there is none.
func decodeRecord(object string, annotations map[string]string) (*Record, error) {
	r, err := record.Decode(object, annotations)
	if r == nil || err != nil {
		return nil, err
	}
	return &Record{Record: *r, stored: annotations[names.MigrationStateAnnotation]}, nil
}
