package record_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/operator/names"
)

func valid() *record.Record {
	return &record.Record{Version: record.Version, Cluster: "legacy", Step: record.StepSetsCreated,
		Started: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC), Sets: []string{"fast"}, Nodes: []string{"a", "b"}, HandedOver: []string{"a"},
		Before: record.Snapshot{Nodes: []record.NodeStorage{{Name: "a", VolumeGroups: []record.VolumeGroup{{Name: "vg1", Devices: []string{"/dev/sdb"}}}}}}}
}

func TestDecode_RoundTrip(t *testing.T) {
	value, err := valid().Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := record.Decode("LVMCluster lvms/legacy", map[string]string{names.MigrationStateAnnotation: value})
	if err != nil {
		t.Fatal(err)
	}
	again, err := got.Encode()
	if err != nil || again != value {
		t.Errorf("decoded and encoded again: %q, %v; want %q", again, err, value)
	}
	if none, err := record.Decode("LVMCluster lvms/legacy", map[string]string{"other": "x"}); none != nil || err != nil {
		t.Errorf("no annotation: %v, %v; want nil, nil", none, err)
	}
}

func TestDecode_Malformed(t *testing.T) {
	cases := []struct {
		name  string
		value func() string
		want  string
	}{
		{"not-json", func() string { return "{" }, "unexpected end of JSON input"},
		{"other-version", func() string { r := valid(); r.Version = 2; return encode(t, r) }, "version 2, this build reads version 1"},
		{"unknown-step", func() string { r := valid(); r.Step = "Halfway"; return encode(t, r) }, `unknown step "Halfway"`},
		{"no-cluster", func() string { r := valid(); r.Cluster = ""; return encode(t, r) }, "no cluster name"},
		{"unsorted", func() string { r := valid(); r.Nodes = []string{"b", "a"}; r.HandedOver = nil; return encode(t, r) }, "not sorted"},
		{"not-a-prefix", func() string { r := valid(); r.HandedOver = []string{"b"}; return encode(t, r) }, "is not a prefix of nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := record.Decode("LVMNodeSet lvms/fast", map[string]string{names.MigrationStateAnnotation: tc.value()})
			var recErr *record.Error
			if r != nil || !errors.As(err, &recErr) {
				t.Fatalf("Decode = %v, %v; want a *record.Error", r, err)
			}
			for _, s := range []string{tc.want, names.MigrationStateAnnotation, "LVMNodeSet lvms/fast", recErr.Fix()} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestStep_Reached(t *testing.T) {
	if !record.StepClassesAdopted.Reached(record.StepSetsCreated) || !record.StepMarked.Reached(record.StepMarked) ||
		record.StepSetsCreated.Reached(record.StepNodesHandedOver) {
		t.Error("steps are not ordered Marked, SetsCreated, NodesHandedOver, ClassesAdopted, ClusterRemoved")
	}
}

func TestEncode_TooLarge(t *testing.T) {
	r := valid()
	r.Before.LogicalVolumes = make([]record.LogicalVolume, 3000)
	for i := range r.Before.LogicalVolumes {
		r.Before.LogicalVolumes[i] = record.LogicalVolume{Name: strings.Repeat("x", 40), UID: strings.Repeat("u", 36), Node: "a", Size: "1Gi"}
	}
	if _, err := r.Encode(); err == nil || !strings.Contains(err.Error(), "more than the 200 KiB") {
		t.Errorf("Encode = %v; want the size refused", err)
	}
}

func encode(t *testing.T, r *record.Record) string {
	t.Helper()
	v, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
