package handover_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

// classUIDs are the UIDs and owner labels of the fixture's StorageClasses.
func (f *fixture) classes() map[string]string {
	out := map[string]string{}
	for _, dc := range []string{"vg1", "othervg"} {
		var sc storagev1.StorageClass
		if optest.Get(f.T, f.C, client.ObjectKey{Name: "lvms-" + f.DC(dc)}, &sc) {
			out[sc.Name] = string(sc.UID) + " " + sc.Labels[names.OwnerKindLabel] + "/" + sc.Labels[names.OwnerNameLabel]
		}
	}
	return out
}

// TestApply_SeedClusterEndToEnd: apply migrates the seed-shaped LVMCluster node by node, reporting
// progress; the classes are the same objects, now the set's; the LVMCluster is gone and verify finds no
// difference.
func TestApply_SeedClusterEndToEnd(t *testing.T) {
	f := newFixture(t, optest.V1Ready)
	before := f.classes()
	var steps []string
	m := f.migrator(f.C)
	m.Progress = func(p handover.Progress) {
		steps = append(steps, fmt.Sprintf("%s %s %d/%d", p.Step, p.Node, p.Done, p.Total))
	}
	if err := m.Apply(context.Background(), f.NS, "my-lvmcluster", f.Plan()); err != nil {
		t.Fatalf("apply: %v", err)
	}
	for _, want := range []string{"mark  1/1", "create-sets  1/1", "hand-over " + f.Nodes[0] + " 1/2", "hand-over " + f.Nodes[1] + " 2/2", "adopt-classes  1/1", "done  1/1"} {
		if !slices.Contains(steps, want) {
			t.Errorf("progress lacks %q: %v", want, steps)
		}
	}
	if f.Cluster() != nil {
		t.Error("the LVMCluster still exists")
	}
	after := f.classes()
	for name, was := range before {
		uid := strings.Fields(was)[0]
		if got := after[name]; got != uid+" LVMNodeSet/my-lvmcluster" {
			t.Errorf("StorageClass %s is %q, want the same object (%s) owned by LVMNodeSet my-lvmcluster", name, got, uid)
		}
	}
	var set lvmv2.LVMNodeSet
	if !optest.Get(t, f.C, client.ObjectKey{Namespace: f.NS, Name: "my-lvmcluster"}, &set) {
		t.Fatal("the LVMNodeSet is missing")
	}
	if got := set.Annotations[names.HandedOverNodesAnnotation]; got != strings.Join(f.Nodes, ",") {
		t.Errorf("handed-over nodes %q, want %q", got, strings.Join(f.Nodes, ","))
	}
	var vgs lvmv1.LVMVolumeGroupList
	if err := f.C.List(context.Background(), &vgs, client.InNamespace(f.NS)); err != nil || len(vgs.Items) != 0 {
		t.Errorf("LVMVolumeGroups left: %d (%v)", len(vgs.Items), err)
	}
	v, err := m.Verify(context.Background(), f.NS, "my-lvmcluster")
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if len(v.Differences) > 0 || v.Step != handover.StepClusterRemoved {
		t.Errorf("verify at step %s found differences: %v", v.Step, v.Differences)
	}
	if len(v.Before.LogicalVolumes) != 1 || len(v.Before.PersistentVolumes) != 1 || len(v.Before.Nodes) != 2 || len(v.Before.Nodes[0].VolumeGroups) != 2 {
		t.Errorf("the record missed storage: %+v", v.Before)
	}
	// Run again: nothing to do.
	if err := m.Apply(context.Background(), f.NS, "my-lvmcluster", nil); err != nil {
		t.Errorf("apply after the end: %v", err)
	}
	// Rollback after the last step refuses and says why.
	err = m.Rollback(context.Background(), f.NS, "my-lvmcluster", nil)
	if !errors.Is(err, handover.ErrPastTheLastStep) || !strings.Contains(err.Error(), "nothing to hand the nodes back to") {
		t.Errorf("rollback after the last step: %v", err)
	}
}

// finalState is what an apply leaves, with the namespace, UIDs and times taken out so that runs in
// different namespaces compare.
func (f *fixture) finalState() string {
	f.T.Helper()
	ctx := context.Background()
	var sets lvmv2.LVMNodeSetList
	var nodes lvmv2.LVMNodeList
	var vgs lvmv1.LVMVolumeGroupList
	for _, l := range []client.ObjectList{&sets, &nodes, &vgs} {
		if err := f.C.List(ctx, l, client.InNamespace(f.NS)); err != nil {
			f.T.Fatal(err)
		}
	}
	type setView struct {
		Name        string
		Annotations map[string]string
		Spec        lvmv2.LVMNodeSetSpec
	}
	state := map[string]any{"cluster": f.Cluster() != nil, "classes": f.classes(), "volumeGroups": len(vgs.Items)}
	var sv []setView
	for _, s := range sets.Items {
		sv = append(sv, setView{s.Name, s.Annotations, s.Spec})
	}
	state["sets"] = sv
	var nv []any
	for _, n := range nodes.Items {
		nv = append(nv, []any{n.Name, n.Spec})
	}
	state["lvmNodes"] = nv
	data, err := json.Marshal(state)
	if err != nil {
		f.T.Fatal(err)
	}
	s := strings.ReplaceAll(string(data), f.NS, "NS")
	s = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`).ReplaceAllString(s, "UID")
	return regexp.MustCompile(`\\"started\\":\\"[^\\]*\\"`).ReplaceAllString(s, "STARTED")
}

// runStopped runs apply with the process stopped after limit writes; it returns how many writes it made.
func runStopped(t *testing.T, f *fixture, limit int) (int, error) {
	w := &writeCounter{Client: f.C, limit: limit}
	err := f.migrator(w).Apply(context.Background(), f.NS, "my-lvmcluster", f.Plan())
	return w.writes, err
}

// TestApply_KillAtEveryStep stops apply after its Nth API write, for every N, runs apply again, and gets
// the state an uninterrupted run leaves.
func TestApply_KillAtEveryStep(t *testing.T) {
	ref := newFixture(t, optest.V1Ready)
	w := &writeCounter{Client: ref.C, limit: -1}
	if err := ref.migrator(w).Apply(context.Background(), ref.NS, "my-lvmcluster", ref.Plan()); err != nil {
		t.Fatalf("uninterrupted apply: %v", err)
	}
	total := w.writes
	want := ref.finalState()
	t.Logf("an uninterrupted apply makes %d writes", total)
	for n := 0; n < total; n++ {
		t.Run(fmt.Sprintf("stopped after write %d", n), func(t *testing.T) {
			f := newFixture(t, optest.V1Ready)
			if _, err := runStopped(t, f, n); !errors.Is(err, errStopped) {
				t.Fatalf("apply stopped after %d writes returned %v, want the injected stop", n, err)
			}
			if err := f.migrator(f.C).Apply(context.Background(), f.NS, "my-lvmcluster", f.Plan()); err != nil {
				t.Fatalf("apply again: %v", err)
			}
			if got := f.finalState(); got != want {
				t.Errorf("final state differs from an uninterrupted run:\n got %s\nwant %s", got, want)
			}
			v, err := f.migrator(f.C).Verify(context.Background(), f.NS, "my-lvmcluster")
			if err != nil || len(v.Differences) > 0 {
				t.Errorf("verify: %v %v", err, v)
			}
		})
	}
}

// TestRollback_FromEveryStepBeforeTheLast stops apply after each write before the LVMCluster's removal and
// rolls back: the LVMCluster manages all its nodes again, unmarked; no set remains; the classes are the
// same objects, the LVMCluster's again.
func TestRollback_FromEveryStepBeforeTheLast(t *testing.T) {
	ref := newFixture(t, optest.V1Ready)
	w := &writeCounter{Client: ref.C, limit: -1}
	if err := ref.migrator(w).Apply(context.Background(), ref.NS, "my-lvmcluster", ref.Plan()); err != nil {
		t.Fatalf("uninterrupted apply: %v", err)
	}
	for n := 0; n < w.writes; n++ { // the last write is the LVMCluster's deletion
		t.Run(fmt.Sprintf("stopped after write %d", n), func(t *testing.T) {
			f := newFixture(t, optest.V1Ready)
			before := f.classes()
			p := f.Plan()
			if _, err := runStopped(t, f, n); !errors.Is(err, errStopped) {
				t.Fatalf("apply stopped after %d writes returned %v", n, err)
			}
			if err := f.migrator(f.C).Rollback(context.Background(), f.NS, "my-lvmcluster", p); err != nil {
				t.Fatalf("rollback: %v", err)
			}
			cl := f.Cluster()
			if cl == nil {
				t.Fatal("the LVMCluster is gone")
			}
			if _, ok := cl.Annotations[names.KeepStorageOnDeleteAnnotation]; ok || cl.Annotations[names.MigrationStateAnnotation] != "" {
				t.Errorf("the LVMCluster is still marked: %v", cl.Annotations)
			}
			var sets lvmv2.LVMNodeSetList
			if err := f.C.List(context.Background(), &sets, client.InNamespace(f.NS)); err != nil || len(sets.Items) != 0 {
				t.Errorf("sets left: %d (%v)", len(sets.Items), err)
			}
			if got := f.classes(); fmt.Sprint(got) != fmt.Sprint(before) {
				t.Errorf("classes %v, want %v (same objects, the LVMCluster's)", got, before)
			}
			f.WaitReady()
		})
	}
}
