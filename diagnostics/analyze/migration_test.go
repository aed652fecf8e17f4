package analyze_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/operator/names"
)

// Fixtures of a migration of LVMCluster "legacy" to the healthy state's LVMNodeSet "fast".

const legacyName = "legacy"

// legacy adds the LVMCluster being migrated, with annotations; its device class selects no node, so only
// the migration annotations say anything about it.
func legacy(s *bundletest.State, annotations map[string]string, opts ...func(*lvmv1.LVMCluster)) {
	c := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: legacyName, Namespace: bundletest.Namespace, UID: "uid-legacy",
		CreationTimestamp: metav1.NewTime(bundletest.At.Add(-48 * time.Hour)), Annotations: annotations},
		Spec: lvmv1.LVMClusterSpec{Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{{Name: "legacy", Default: true,
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "legacy-storage", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}}}}}}}}}
	for _, o := range opts {
		o(c)
	}
	s.Objects = append(s.Objects, c)
}

// deleted marks the LVMCluster deleted ago, with the status message its teardown writes.
func deleted(ago time.Duration, message string) func(*lvmv1.LVMCluster) {
	return func(c *lvmv1.LVMCluster) {
		c.DeletionTimestamp = ptr.To(metav1.NewTime(bundletest.At.Add(-ago)))
		c.Finalizers = []string{"lvm.topolvm.io/lvmcluster"}
		c.Status.State, c.Status.Message = lvmv1.LVMStatusProgressing, message
	}
}

// migrated marks the set "fast" as migrated from legacy with these nodes handed over, and the record
// (when not "") copied onto it.
func migrated(s *bundletest.State, handedOver, rec string) {
	set := bundletest.Find[*lvmv2.LVMNodeSet](s, bundletest.Set)
	set.Annotations = map[string]string{names.MigratedFromAnnotation: legacyName}
	if handedOver != "" {
		set.Annotations[names.HandedOverNodesAnnotation] = handedOver
	}
	if rec != "" {
		set.Annotations[names.MigrationStateAnnotation] = rec
	}
}

// rec is the record of legacy's migration at step, with the first handed of the healthy nodes handed over.
func rec(step record.Step, handed int, nodes ...string) string {
	if nodes == nil {
		nodes = bundletest.Nodes
	}
	r := record.Record{Version: record.Version, Cluster: legacyName, Step: step, Started: bundletest.At.Add(-3 * time.Hour),
		Sets: []string{bundletest.Set}, Nodes: nodes, HandedOver: nodes[:handed]}
	for _, n := range nodes {
		r.Before.Nodes = append(r.Before.Nodes, record.NodeStorage{Name: n, VolumeGroups: []record.VolumeGroup{{Name: "legacy", Devices: []string{"/dev/sdb"}}}})
	}
	v, err := r.Encode()
	if err != nil {
		panic(err)
	}
	return v
}

func marked(recValue string) map[string]string {
	a := map[string]string{names.KeepStorageOnDeleteAnnotation: "true"}
	if recValue != "" {
		a[names.MigrationStateAnnotation] = recValue
	}
	return a
}

const stillManages = "deleting: the LVMCluster is marked lvm.topolvm.io/keep-storage-on-delete=true, so its teardown keeps the storage, and it still manages node(s) worker-b"

// migrationCases are broken bundles for MigrationIncomplete; TestRun_BrokenBundles and
// TestRun_SameVerdictOnAnyDate run them with the others (golden files, tar.gz round trip, dates moved).
var migrationCases = []brokenCase{
	{name: "migration-half-way", break_: func(s *bundletest.State) {
		legacy(s, marked(rec(record.StepSetsCreated, 1)))
		migrated(s, bundletest.NodeA, "")
	}, want: []want{{analyze.CheckMigration, analyze.Warn, "", []string{
		"migration of LVMCluster lvms/legacy to LVMNodeSets fast stopped at step SetsCreated (2 of 5",
		"apply started it at " + bundletest.At.Add(-3*time.Hour).Format(time.RFC3339), "3h0m0s before this bundle was collected",
		"Handed over: worker-a of 2 node(s).", "Still with the LVMCluster: worker-b."}}}},
	{name: "migration-half-way-node-listed-not-confirmed", break_: func(s *bundletest.State) {
		legacy(s, marked(rec(record.StepSetsCreated, 0)))
		migrated(s, bundletest.NodeA, "")
	}, want: []want{{analyze.CheckMigration, analyze.Warn, "", []string{
		"Handed over: none of 2 node(s).", "not yet confirmed (their LVMNode had not matched what v1 reported): worker-a.", "Still with the LVMCluster: worker-b."}}}},
	{name: "migration-cluster-deleted-mid-way", break_: func(s *bundletest.State) {
		legacy(s, marked(rec(record.StepSetsCreated, 1)), deleted(10*time.Minute, stillManages))
		migrated(s, bundletest.NodeA, "")
	}, want: []want{{analyze.CheckMigration, analyze.Fail, "", []string{
		"LVMCluster lvms/legacy was deleted 10m0s ago while its migration to LVMNodeSets fast was at step SetsCreated", "still manages node(s) worker-b",
		"Neither lvms migrate apply nor rollback goes on"}}}},
	{name: "migration-removal-stuck", break_: func(s *bundletest.State) {
		legacy(s, marked(rec(record.StepClassesAdopted, 2)), deleted(20*time.Minute, "deleting: device class legacy: releasing the LVMVolumeGroup"))
		migrated(s, bundletest.NodeA+","+bundletest.NodeB, "")
	}, want: []want{{analyze.CheckMigration, analyze.Fail, "", []string{
		"was deleted 20m0s ago by the last step of its migration", `its status says Progressing: "deleting: device class legacy: releasing the LVMVolumeGroup"`}}}},
	{name: "keep-storage-without-migration", break_: func(s *bundletest.State) {
		legacy(s, marked(""))
	}, want: []want{{analyze.CheckMigration, analyze.Warn, "", []string{
		"LVMCluster lvms/legacy carries lvm.topolvm.io/keep-storage-on-delete=true but no migration record", "LVMNodeSets migrated from it: none."}}}},
	{name: "keep-storage-stuck-deleting", break_: func(s *bundletest.State) {
		legacy(s, marked(""), deleted(30*time.Minute, stillManages))
	}, want: []want{{analyze.CheckMigration, analyze.Fail, "", []string{
		"with no migration record, was deleted 30m0s ago and is still there", "still manages node(s) worker-b"}}}},
	{name: "sets-of-removed-cluster-hand-over-incomplete", break_: func(s *bundletest.State) {
		migrated(s, bundletest.NodeA, "")
	}, want: []want{{analyze.CheckMigration, analyze.Warn, "", []string{
		"LVMNodeSet lvms/fast is migrated from LVMCluster lvms/legacy, which no longer exists", "lists worker-a of the nodes it selects; never handed over: worker-b",
		"the sets carry no migration record"}}}},
	{name: "migration-record-malformed", break_: func(s *bundletest.State) {
		legacy(s, marked(`{"version":1,"cluster":"legacy","step":"Halfway"}`))
		migrated(s, "", "")
	}, want: []want{{analyze.CheckMigration, analyze.Fail, "", []string{
		"Annotation lvm.topolvm.io/migration-state on LVMCluster lvms/legacy is not a valid migration record: unknown step \"Halfway\""}}}},
	{name: "migration-record-malformed-on-set", break_: func(s *bundletest.State) {
		migrated(s, bundletest.NodeA+","+bundletest.NodeB, "{")
	}, want: []want{{analyze.CheckMigration, analyze.Fail, "", []string{
		"Annotation lvm.topolvm.io/migration-state on LVMNodeSet lvms/fast is not a valid migration record"}}}},
}

// TestRun_Migration: each broken migration gives its finding with the object concerned and a fix naming
// the way out; a finished migration, one under way, or none gives no warn or fail of MigrationIncomplete.
func TestRun_Migration(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(s *bundletest.State)
		// object the finding is about, and what its fix must say; "" for no warn or fail.
		object string
		fix    []string
	}{
		{name: "no migration", break_: func(*bundletest.State) {}},
		{name: "plain LVMCluster", break_: func(s *bundletest.State) { legacy(s, nil) }},
		{name: "finished", break_: func(s *bundletest.State) {
			migrated(s, bundletest.NodeA+","+bundletest.NodeB, rec(record.StepClusterRemoved, 2))
		}},
		{name: "finished, a node added to the set since", break_: func(s *bundletest.State) {
			migrated(s, bundletest.NodeA, rec(record.StepClusterRemoved, 1, bundletest.NodeA))
		}},
		{name: "removal under way", break_: func(s *bundletest.State) {
			legacy(s, marked(rec(record.StepClassesAdopted, 2)), deleted(time.Minute, "deleting: removing volume groups"))
			migrated(s, bundletest.NodeA+","+bundletest.NodeB, "")
		}},
		{name: "LVMClusters not collected", break_: func(s *bundletest.State) {
			migrated(s, bundletest.NodeA, "")
			s.Manifest.Collectors = []bundle.CollectorRun{{Name: "resources/lvmclusters.lvm.topolvm.io", Error: "forbidden"}}
		}},
		{name: "half-way", break_: migrationCase("migration-half-way"), object: "LVMCluster lvms/legacy",
			fix: []string{"`lvms migrate apply -n lvms legacy` to resume from step SetsCreated", "`lvms migrate rollback -n lvms legacy` to hand every node back"}},
		{name: "deleted mid-way", break_: migrationCase("migration-cluster-deleted-mid-way"), object: "LVMCluster lvms/legacy",
			fix: []string{"A deletion cannot be undone", "lvm.topolvm.io/handed-over-nodes"}},
		{name: "removal stuck", break_: migrationCase("migration-removal-stuck"), object: "LVMCluster lvms/legacy",
			fix: []string{"Do what the status message asks", "`lvms migrate apply -n lvms legacy`"}},
		{name: "kept without record", break_: migrationCase("keep-storage-without-migration"), object: "LVMCluster lvms/legacy",
			fix: []string{"`lvms migrate apply -n lvms legacy`", "`kubectl annotate lvmcluster -n lvms legacy lvm.topolvm.io/keep-storage-on-delete-`"}},
		{name: "kept, stuck deleting", break_: migrationCase("keep-storage-stuck-deleting"), object: "LVMCluster lvms/legacy",
			fix: []string{"hand each node over", "remove the mark"}},
		{name: "sets of a removed cluster", break_: migrationCase("sets-of-removed-cluster-hand-over-incomplete"), object: "LVMNodeSet lvms/fast",
			fix: []string{"LVMNode shows the volume groups", "remove lvm.topolvm.io/migrated-from and lvm.topolvm.io/handed-over-nodes"}},
		{name: "sets of a removed cluster, with the record", break_: func(s *bundletest.State) {
			migrated(s, bundletest.NodeA, rec(record.StepClusterRemoved, 1))
		}, object: "LVMNodeSet lvms/fast", fix: []string{"`lvms migrate verify -n lvms legacy`"}},
		{name: "malformed record", break_: migrationCase("migration-record-malformed"), object: "LVMCluster lvms/legacy",
			fix: []string{"remove it and lvm.topolvm.io/keep-storage-on-delete from the LVMCluster", "run lvms migrate apply again"}},
		{name: "malformed record on a set", break_: migrationCase("migration-record-malformed-on-set"), object: "LVMNodeSet lvms/fast",
			fix: []string{"remove it from the LVMNodeSets", "no migration left to resume or roll back"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := bundletest.Healthy()
			tc.break_(s)
			fs := analyze.Run(s.Bundle(t))
			var got []analyze.Finding
			for _, f := range fs {
				if f.CheckName == analyze.CheckMigration && f.Severity != analyze.Pass {
					got = append(got, f)
				}
			}
			if tc.object == "" {
				if len(got) > 0 {
					t.Fatalf("want no warn or fail, got:\n%s", text(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("want one finding on %s, got:\n%s", tc.object, text(got))
			}
			f := got[0]
			if f.InvolvedObject == nil || f.InvolvedObject.String() != tc.object {
				t.Errorf("finding is on %v, want %s", f.InvolvedObject, tc.object)
			}
			for _, want := range tc.fix {
				if !strings.Contains(f.Fix, want) {
					t.Errorf("fix %q lacks %q", f.Fix, want)
				}
			}
		})
	}
}

// A finished migration leaves a healthy bundle: nothing warns or fails anywhere, and the migration is
// reported as finished.
func TestRun_FinishedMigrationIsHealthy(t *testing.T) {
	s := bundletest.Healthy()
	migrated(s, bundletest.NodeA+","+bundletest.NodeB, rec(record.StepClusterRemoved, 2))
	fs := analyze.Run(s.Bundle(t))
	for _, f := range fs {
		if f.Severity != analyze.Pass {
			t.Errorf("%s %s: %s", f.Severity, f.CheckName, f.Message)
		}
	}
	if !slices.ContainsFunc(fs, func(f analyze.Finding) bool {
		return f.CheckName == analyze.CheckMigration && f.Title == "Migration finished" && strings.Contains(f.Message, "every node it managed is handed over")
	}) {
		t.Errorf("no finished migration reported:\n%s", text(fs))
	}
}

func migrationCase(name string) func(*bundletest.State) {
	i := slices.IndexFunc(migrationCases, func(c brokenCase) bool { return c.name == name })
	return migrationCases[i].break_
}
