package analyze

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/operator/names"
)

// lvmClustersCollector is the collector of LVMClusters: without it, an LVMCluster missing from the bundle
// may still exist.
const lvmClustersCollector = "resources/lvmclusters.lvm.topolvm.io"

// checkMigration reports `lvms migrate` runs left half-way, from what the bundle holds: the migration
// record (names.MigrationStateAnnotation, migrate/record) on an LVMCluster, or on its LVMNodeSets once it is
// removed; the keep-storage mark; and the sets' migrated-from and handed-over-nodes annotations.
func checkMigration(in *input) []Finding {
	var out []Finding
	clusters := map[string]bool{}
	for i := range in.snap.LVMClusters {
		c := &in.snap.LVMClusters[i]
		clusters[c.Namespace+"/"+c.Name] = true
		out = append(out, in.clusterMigration(c)...)
	}
	if !in.ran(lvmClustersCollector) {
		return out
	}
	// Sets migrated from an LVMCluster the bundle does not hold, by namespace and cluster.
	gone := map[string][]*lvmv2.LVMNodeSet{}
	for i := range in.snap.LVMNodeSets {
		s := &in.snap.LVMNodeSets[i]
		if from := s.Annotations[names.MigratedFromAnnotation]; from != "" && !clusters[s.Namespace+"/"+from] {
			gone[s.Namespace+"/"+from] = append(gone[s.Namespace+"/"+from], s)
		}
	}
	for _, key := range sortedKeys(gone) {
		ns, name, _ := strings.Cut(key, "/")
		out = append(out, in.orphanedSets(ns, name, gone[key])...)
	}
	return out
}

// clusterMigration reports on one LVMCluster: an unreadable record, a removal under way or stuck, a
// migration stopped half-way, or the keep mark without a migration.
func (in *input) clusterMigration(c *lvmv1.LVMCluster) []Finding {
	obj := clusterObject(c.Namespace, c.Name)
	rec, err := record.Decode("LVMCluster "+c.Namespace+"/"+c.Name, c.Annotations)
	if err != nil {
		return []Finding{malformedRecord(err, obj)}
	}
	keep := names.KeepStorage(c.Annotations)
	sets := migratedSets(in.snap.LVMNodeSets, c.Namespace, c.Name)
	switch {
	case c.DeletionTimestamp != nil && (keep || rec != nil):
		return []Finding{in.clusterRemoval(c, rec, sets)}
	case rec != nil:
		return []Finding{in.halfWay(c, rec, sets)}
	case keep:
		return []Finding{keptWithoutRecord(c, sets)}
	}
	return nil
}

// halfWay is a migration whose record is on a live LVMCluster: apply stopped before the last step.
func (in *input) halfWay(c *lvmv1.LVMCluster, rec *record.Record, sets []*lvmv2.LVMNodeSet) Finding {
	ref := c.Namespace + "/" + c.Name
	return Finding{Severity: Warn, Title: "Migration left half-way", InvolvedObject: clusterObject(c.Namespace, c.Name), Codes: []string{string(rec.Step)},
		Message: strings.TrimSpace(fmt.Sprintf("The migration of LVMCluster %s to LVMNodeSets %s stopped at step %s (%s). %s %s",
			ref, orNone(rec.Sets), rec.Step, in.stepAndStart(rec), nodeProgress(rec, sets), setsPresent(rec, sets))),
		Fix: fmt.Sprintf("If no lvms migrate apply or rollback is running now, run `lvms migrate apply -n %s %s` to resume from step %s, or `lvms migrate rollback -n %s %s` to hand every node back to the LVMCluster and delete the sets.",
			c.Namespace, c.Name, rec.Step, c.Namespace, c.Name),
		Command: fmt.Sprintf("lvms migrate apply -n %s %s", c.Namespace, c.Name)}
}

// clusterRemoval is a deleted LVMCluster that keeps its storage or carries a record: the migration's last
// step under way or stuck, or a deletion in the middle of a migration, which neither apply nor rollback
// continues.
func (in *input) clusterRemoval(c *lvmv1.LVMCluster, rec *record.Record, sets []*lvmv2.LVMNodeSet) Finding {
	ref := c.Namespace + "/" + c.Name
	obj := clusterObject(c.Namespace, c.Name)
	age := in.at.Sub(c.DeletionTimestamp.Time).Round(time.Second)
	status := clusterStatus(c)
	switch {
	case rec != nil && rec.Step.Reached(record.StepClassesAdopted) && age < StuckAfter:
		return Finding{Severity: Pass, Title: "LVMCluster being removed by its migration", InvolvedObject: obj, Codes: []string{string(rec.Step)},
			Message: fmt.Sprintf("LVMCluster %s is being removed, the last step of its migration to LVMNodeSets %s (deleted %s ago); %s.", ref, orNone(rec.Sets), age, status),
			Fix:     fmt.Sprintf("Nothing to do: `lvms migrate apply -n %s %s` follows the removal.", c.Namespace, c.Name)}
	case rec != nil && rec.Step.Reached(record.StepClassesAdopted):
		return Finding{Severity: Fail, Title: "Migration stuck removing the LVMCluster", InvolvedObject: obj, Codes: []string{string(rec.Step)},
			Message: fmt.Sprintf("LVMCluster %s was deleted %s ago by the last step of its migration to LVMNodeSets %s and is still there; %s. The sets already own its nodes and classes.",
				ref, age, orNone(rec.Sets), status),
			Fix: fmt.Sprintf("Do what the status message asks (it names what the teardown waits for), then follow the removal with `lvms migrate apply -n %s %s`. The migration can no longer be rolled back.",
				c.Namespace, c.Name),
			Command: fmt.Sprintf("kubectl get lvmcluster -n %s %s -o yaml", c.Namespace, c.Name)}
	case rec != nil:
		f := Finding{Severity: Fail, Title: "LVMCluster deleted in the middle of its migration", InvolvedObject: obj, Codes: []string{string(rec.Step)},
			Message: fmt.Sprintf("LVMCluster %s was deleted %s ago while its migration to LVMNodeSets %s was at step %s (%s); %s. %s Neither lvms migrate apply nor rollback goes on once the LVMCluster is being deleted.",
				ref, age, orNone(rec.Sets), rec.Step, in.stepAndStart(rec), status, nodeProgress(rec, sets)),
			Fix: fmt.Sprintf("A deletion cannot be undone. Its teardown waits until the LVMCluster manages no node: list each node still waiting in %s on the LVMNodeSets that select it (`kubectl annotate lvmnodeset -n %s SET %s=NODE,... --overwrite`, keeping the nodes listed already), check that its LVMNode shows the volume groups Healthy, and the removal completes; the sets then adopt the classes.",
				names.HandedOverNodesAnnotation, c.Namespace, names.HandedOverNodesAnnotation),
			Command: fmt.Sprintf("kubectl get lvmnodesets,lvmnodes -n %s", c.Namespace)}
		if !names.KeepStorage(c.Annotations) {
			f.Warning = fmt.Sprintf("The LVMCluster no longer carries %s=true, so this teardown deletes its StorageClasses and, once their volumes are gone, the volume groups of the nodes it still manages.", names.KeepStorageOnDeleteAnnotation)
		}
		return f
	case age < StuckAfter:
		return Finding{Severity: Pass, Title: "LVMCluster being removed, keeping its storage", InvolvedObject: obj,
			Message: fmt.Sprintf("LVMCluster %s, marked %s=true, is being removed (deleted %s ago); %s.", ref, names.KeepStorageOnDeleteAnnotation, age, status),
			Fix:     "Nothing to do yet: the teardown keeps the volume groups, volumes and classes."}
	}
	return Finding{Severity: Fail, Title: "LVMCluster stuck deleting while keeping its storage", InvolvedObject: obj,
		Message: fmt.Sprintf("LVMCluster %s, marked %s=true and with no migration record, was deleted %s ago and is still there; %s. LVMNodeSets migrated from it: %s.",
			ref, names.KeepStorageOnDeleteAnnotation, age, status, setList(sets)),
		Fix: fmt.Sprintf("Do what the status message asks. A teardown that keeps the storage waits until the LVMCluster manages no node: hand each node over (list it in %s on an LVMNodeSet whose %s names this LVMCluster), or remove the mark to let the ordinary teardown run (`kubectl annotate lvmcluster -n %s %s %s-`).",
			names.HandedOverNodesAnnotation, names.MigratedFromAnnotation, c.Namespace, c.Name, names.KeepStorageOnDeleteAnnotation),
		Command: fmt.Sprintf("kubectl get lvmcluster -n %s %s -o yaml", c.Namespace, c.Name),
		Warning: "Without the mark the teardown deletes the LVMCluster's StorageClasses and, once their volumes are gone, its volume groups."}
}

// keptWithoutRecord is an LVMCluster marked to keep its storage that no migration accounts for.
func keptWithoutRecord(c *lvmv1.LVMCluster, sets []*lvmv2.LVMNodeSet) Finding {
	return Finding{Severity: Warn, Title: "LVMCluster marked to keep its storage, with no migration", InvolvedObject: clusterObject(c.Namespace, c.Name),
		Message: fmt.Sprintf("LVMCluster %s/%s carries %s=true but no migration record (%s): deleting it would leave its volume groups, volumes and classes behind. LVMNodeSets migrated from it: %s.",
			c.Namespace, c.Name, names.KeepStorageOnDeleteAnnotation, names.MigrationStateAnnotation, setList(sets)),
		Fix: fmt.Sprintf("If a migration was meant, run `lvms migrate preflight -n %s %s` and then `lvms migrate apply -n %s %s`, which records one and goes on. Otherwise remove the mark: `kubectl annotate lvmcluster -n %s %s %s-`.",
			c.Namespace, c.Name, c.Namespace, c.Name, c.Namespace, c.Name, names.KeepStorageOnDeleteAnnotation),
		Command: fmt.Sprintf("lvms migrate preflight -n %s %s", c.Namespace, c.Name)}
}

// orphanedSets reports the LVMNodeSets migrated from an LVMCluster the bundle does not hold: each set that
// has not every node it selects (of those the record lists, when there is one) handed over, or, when all
// are, the migration as finished.
func (in *input) orphanedSets(ns, cluster string, sets []*lvmv2.LVMNodeSet) []Finding {
	slices.SortFunc(sets, func(a, b *lvmv2.LVMNodeSet) int { return strings.Compare(a.Name, b.Name) })
	var rec *record.Record
	for _, s := range sets {
		r, err := record.Decode("LVMNodeSet "+ns+"/"+s.Name, s.Annotations)
		if err != nil {
			f := malformedRecord(err, setObject(ns, s.Name))
			f.Fix = fmt.Sprintf("Only lvms migrate writes it: restore it from a backup (lvms migrate verify compares with it), or remove it from the LVMNodeSets that carry it: LVMCluster %s/%s is gone, so there is no migration left to resume or roll back.", ns, cluster)
			return []Finding{f}
		}
		if r != nil {
			rec = r
			break
		}
	}
	ref := ns + "/" + cluster
	var out []Finding
	for _, s := range sets {
		handed := names.HandedOverNodes(s.Annotations)
		var missing []string
		for _, n := range in.selectedBy(ns, s.Name) {
			if !slices.Contains(handed, n) && (rec == nil || slices.Contains(rec.Nodes, n)) {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			continue
		}
		why := "the sets carry no migration record, so the LVMCluster was removed by hand before the migration's last step"
		fix := fmt.Sprintf("Check on each of those nodes that its LVMNode shows the volume groups and devices it had under the LVMCluster (`kubectl get lvmnode -n %s NODE -o yaml`).", ns)
		cmd := fmt.Sprintf("kubectl get lvmnodes -n %s", ns)
		if rec != nil {
			why = fmt.Sprintf("the migration record on the sets is at step %s (%s)", rec.Step, in.stepAndStart(rec))
			fix = fmt.Sprintf("Compare each of those nodes with what v1 reported: `lvms migrate verify -n %s %s`.", ns, cluster)
			cmd = fmt.Sprintf("lvms migrate verify -n %s %s", ns, cluster)
		}
		out = append(out, Finding{Severity: Warn, Title: "LVMNodeSet migrated from a removed LVMCluster, hand-over incomplete", InvolvedObject: setObject(ns, s.Name),
			Message: fmt.Sprintf("LVMNodeSet %s/%s is migrated from LVMCluster %s, which no longer exists, but %s lists %s of the nodes it selects; never handed over: %s (%s). With the LVMCluster gone the set manages them anyway, without the check that their volume groups are the ones v1 had.",
				ns, s.Name, ref, names.HandedOverNodesAnnotation, orNone(handed), strings.Join(missing, ", "), why),
			Fix: fix + fmt.Sprintf(" Then list the nodes in %s, or remove %s and %s from the set, so that it no longer describes a migration.",
				names.HandedOverNodesAnnotation, names.MigratedFromAnnotation, names.HandedOverNodesAnnotation),
			Command: cmd})
	}
	if len(out) == 0 && rec != nil {
		out = append(out, Finding{Severity: Pass, Title: "Migration finished", InvolvedObject: setObject(ns, sets[0].Name),
			Message: fmt.Sprintf("LVMCluster %s was migrated to LVMNodeSets %s and removed; every node it managed is handed over (record at step %s, %s).",
				ref, orNone(rec.Sets), rec.Step, in.stepAndStart(rec)),
			Fix:     fmt.Sprintf("Nothing to do: `lvms migrate verify -n %s %s` compares the storage with what v1 showed.", ns, cluster),
			Command: fmt.Sprintf("lvms migrate verify -n %s %s", ns, cluster)})
	}
	return out
}

// malformedRecord is a names.MigrationStateAnnotation value migrate/record cannot read.
func malformedRecord(err error, obj *Object) Finding {
	recErr, ok := errors.AsType[*record.Error](err)
	if !ok {
		recErr = &record.Error{Object: obj.String(), Err: err}
	}
	return Finding{Severity: Fail, Title: "Migration record unreadable", InvolvedObject: obj, Codes: []string{names.MigrationStateAnnotation},
		Message: fmt.Sprintf("Annotation %s on %s is not a valid migration record: %v. lvms migrate apply, rollback and verify all refuse to run while it is there.",
			names.MigrationStateAnnotation, obj, recErr.Err),
		Fix: recErr.Fix() + "."}
}

// stepAndStart says where a step is in the order and when apply started.
func (in *input) stepAndStart(rec *record.Record) string {
	steps := record.Steps()
	s := fmt.Sprintf("%d of %d", slices.Index(steps, rec.Step)+1, len(steps))
	if rec.Started.IsZero() {
		return s
	}
	return fmt.Sprintf("%s; apply started it at %s, %s before this bundle was collected, and the record keeps no later time",
		s, rec.Started.UTC().Format(time.RFC3339), in.at.Sub(rec.Started).Round(time.Second))
}

// nodeProgress says which nodes are handed over (as the record confirms), which are listed on the sets but
// not yet confirmed, and which still wait.
func nodeProgress(rec *record.Record, sets []*lvmv2.LVMNodeSet) string {
	var listed []string
	for _, s := range sets {
		listed = append(listed, names.HandedOverNodes(s.Annotations)...)
	}
	var pending, waiting []string
	for _, n := range rec.Nodes {
		switch {
		case slices.Contains(rec.HandedOver, n):
		case slices.Contains(listed, n):
			pending = append(pending, n)
		default:
			waiting = append(waiting, n)
		}
	}
	s := fmt.Sprintf("Handed over: %s of %d node(s).", orNone(rec.HandedOver), len(rec.Nodes))
	if len(pending) > 0 {
		s += fmt.Sprintf(" Listed in %s but not yet confirmed (their LVMNode had not matched what v1 reported): %s.", names.HandedOverNodesAnnotation, strings.Join(pending, ", "))
	}
	return s + fmt.Sprintf(" Still with the LVMCluster: %s.", orNone(waiting))
}

// setsPresent names the planned sets the bundle does not hold, when the record says they were created.
func setsPresent(rec *record.Record, sets []*lvmv2.LVMNodeSet) string {
	if !rec.Step.Reached(record.StepSetsCreated) {
		return ""
	}
	var missing []string
	for _, name := range rec.Sets {
		if !slices.ContainsFunc(sets, func(s *lvmv2.LVMNodeSet) bool { return s.Name == name }) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("The record says the sets were created, but these are missing or no longer name the LVMCluster in %s: %s.", names.MigratedFromAnnotation, strings.Join(missing, ", "))
}

// selectedBy returns the nodes an LVMNodeSet selects, as the operator computes them.
func (in *input) selectedBy(ns, set string) []string {
	for _, inv := range in.inventories {
		if inv.Namespace == ns {
			return inv.Selected[set]
		}
	}
	return nil
}

// migratedSets are the LVMNodeSets of ns whose migrated-from names cluster, sorted by name.
func migratedSets(all []lvmv2.LVMNodeSet, ns, cluster string) []*lvmv2.LVMNodeSet {
	var out []*lvmv2.LVMNodeSet
	for i := range all {
		if s := &all[i]; s.Namespace == ns && s.Annotations[names.MigratedFromAnnotation] == cluster {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *lvmv2.LVMNodeSet) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func clusterObject(ns, name string) *Object {
	return &Object{APIVersion: lvmv1.GroupVersion.String(), Kind: "LVMCluster", Namespace: ns, Name: name}
}

func clusterStatus(c *lvmv1.LVMCluster) string {
	if c.Status.Message == "" {
		return "its status gives no reason"
	}
	return fmt.Sprintf("its status says %s: %q", c.Status.State, c.Status.Message)
}

func setList(sets []*lvmv2.LVMNodeSet) string {
	var out []string
	for _, s := range sets {
		out = append(out, s.Name)
	}
	return orNone(out)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// splitList reads a comma-separated annotation value.
