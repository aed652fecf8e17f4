package handover

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/operator/apply"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/words"
)

// handOverFieldOwner writes only the handed-over-nodes annotation, so re-applying a set (manager
// names.MigrateFieldOwner) never drops a hand-over, and handing a node back never touches the spec.
const handOverFieldOwner = names.MigrateFieldOwner + "/handover"

// Apply runs (or resumes) the migration of the LVMCluster p plans, from the step the record in the API
// says. p is the plan of the LVMCluster as it is now; nil is allowed only when the LVMCluster is gone, and
// then Apply only confirms that the migration finished.
func (m *Migrator) Apply(ctx context.Context, ns, name string, p *plan.Plan) error {
	cl, rec, _, err := m.loadRecord(ctx, ns, name)
	if err != nil {
		return err
	}
	switch {
	case cl == nil && rec != nil && rec.Step == StepClusterRemoved:
		m.report(Progress{Step: "done", Done: 1, Total: 1, Message: fmt.Sprintf("LVMCluster %s/%s was removed; the LVMNodeSets %s manage its storage", ns, name, strings.Join(rec.Sets, ", "))})
		return nil
	case cl == nil:
		return fmt.Errorf("no LVMCluster %s/%s and no finished migration of it: check the name and namespace", ns, name)
	case cl.DeletionTimestamp != nil && rec != nil && rec.Step.Reached(StepClassesAdopted):
		return m.awaitRemoval(ctx, cl)
	case cl.DeletionTimestamp != nil:
		return fmt.Errorf("LVMCluster %s/%s is being deleted, and not by a migration: nothing to migrate", ns, name)
	case p == nil:
		return fmt.Errorf("apply needs the plan of LVMCluster %s/%s", ns, name)
	}
	if rec == nil {
		if rec, err = m.mark(ctx, cl, p); err != nil {
			return err
		}
	} else {
		m.report(Progress{Step: "mark", Done: 1, Total: 1, Message: fmt.Sprintf("resuming the migration of LVMCluster %s/%s at step %s", ns, name, rec.Step)})
	}
	if !rec.Step.Reached(StepSetsCreated) {
		if err := m.createSets(ctx, cl, rec, p); err != nil {
			return err
		}
	}
	if !rec.Step.Reached(StepNodesHandedOver) {
		if err := m.handOver(ctx, cl, rec, p); err != nil {
			return err
		}
	}
	if !rec.Step.Reached(StepClassesAdopted) {
		if err := m.adoptClasses(ctx, cl, rec, p); err != nil {
			return err
		}
	}
	return m.removeCluster(ctx, cl, rec)
}

// saveRecord writes rec to the LVMCluster as it is now. The record there must still be the one this run
// read or wrote last: otherwise a second apply or rollback runs at the same time, and this one stops.
func (m *Migrator) saveRecord(ctx context.Context, cl *lvmv1.LVMCluster, rec *Record, extra map[string]string) error {
	value, err := rec.Encode()
	if err != nil {
		return err
	}
	// The operator writes the LVMCluster too (status, finalizer): retry on those conflicts, re-checking
	// the record every time.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := m.getCluster(ctx, cl.Namespace, cl.Name)
		switch {
		case err != nil:
			return err
		case cur == nil:
			return fmt.Errorf("LVMCluster %s/%s disappeared during the migration", cl.Namespace, cl.Name)
		case cur.Annotations[names.MigrationStateAnnotation] != rec.stored:
			return fmt.Errorf("the migration record on LVMCluster %s/%s changed while this run was at step %s: another lvms migrate apply or rollback is running; let it finish, then run this again",
				cl.Namespace, cl.Name, rec.Step)
		}
		base := cur.DeepCopy()
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		maps.Copy(cur.Annotations, extra)
		cur.Annotations[names.MigrationStateAnnotation] = value
		return m.Client.Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("record step %s on LVMCluster %s/%s: %w", rec.Step, cl.Namespace, cl.Name, err)
	}
	rec.stored = value
	return nil
}

// mark records what v1 shows and marks the LVMCluster to keep its storage when it is removed, in one write.
func (m *Migrator) mark(ctx context.Context, cl *lvmv1.LVMCluster, p *plan.Plan) (*Record, error) {
	before, err := observeV1(ctx, m.Client, cl, p)
	if err != nil {
		return nil, err
	}
	rec := &Record{Record: record.Record{Version: record.Version, Cluster: cl.Name, Step: StepMarked, Started: m.clock().Now().UTC().Truncate(time.Second), Before: before}}
	for _, s := range p.NodeSets {
		rec.Sets = append(rec.Sets, s.Name)
	}
	for _, n := range before.Nodes {
		rec.Nodes = append(rec.Nodes, n.Name)
	}
	slices.Sort(rec.Sets)
	if err := m.saveRecord(ctx, cl, rec, map[string]string{names.KeepStorageOnDeleteAnnotation: "true"}); err != nil {
		return nil, err
	}
	m.report(Progress{Step: "mark", Done: 1, Total: 1, Message: fmt.Sprintf("marked LVMCluster %s/%s to keep its storage when removed; recorded %s, %s, %s",
		cl.Namespace, cl.Name, words.Count(len(rec.Nodes), "node", "nodes"), words.Count(len(before.LogicalVolumes), "LogicalVolume", "LogicalVolumes"),
		words.Count(len(before.PersistentVolumes), "PersistentVolume", "PersistentVolumes"))})
	return rec, nil
}

// createSets applies the planned sets (server-side apply, field manager names.MigrateFieldOwner).
func (m *Migrator) createSets(ctx context.Context, cl *lvmv1.LVMCluster, rec *Record, p *plan.Plan) error {
	for i := range p.NodeSets {
		want := p.NodeSets[i].DeepCopy()
		want.Namespace = cl.Namespace
		var cur lvmv2.LVMNodeSet
		err := m.Client.Get(ctx, client.ObjectKeyFromObject(want), &cur)
		switch {
		case err == nil && cur.Annotations[names.MigratedFromAnnotation] != cl.Name:
			return fmt.Errorf("LVMNodeSet %s/%s exists and is not a migration of LVMCluster %s: rename or delete it, then run apply again", cur.Namespace, cur.Name, cl.Name)
		case err == nil && equality.Semantic.DeepEqual(cur.Spec, want.Spec):
			continue // applied before an interruption
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("get LVMNodeSet %s/%s: %w", want.Namespace, want.Name, err)
		}
		u, err := applyConfig(m.Client, want)
		if err != nil {
			return err
		}
		if err := apply.Unstructured(ctx, m.Client, u, names.MigrateFieldOwner, true); err != nil {
			return err
		}
		m.report(Progress{Step: "create-sets", Done: i + 1, Total: len(p.NodeSets), Message: fmt.Sprintf("created LVMNodeSet %s/%s", want.Namespace, want.Name)})
	}
	rec.Step = StepSetsCreated
	return m.saveRecord(ctx, cl, rec, nil)
}

// handOver hands the nodes over one at a time, in sorted order: every set that selects the node lists it,
// then the node counts as handed over once its LVMNode status shows what v1 reported.
func (m *Migrator) handOver(ctx context.Context, cl *lvmv1.LVMCluster, rec *Record, p *plan.Plan) error {
	for i, node := range rec.Nodes {
		if i < len(rec.HandedOver) {
			continue
		}
		m.report(Progress{Step: "hand-over", Node: node, Done: i, Total: len(rec.Nodes), Message: "handing node " + node + " over to the LVMNodeSets"})
		if err := m.listNode(ctx, cl.Namespace, node, p); err != nil {
			return err
		}
		want := rec.Before.Nodes[i]
		err := m.waitFor(ctx, fmt.Sprintf("the LVMNode of node %s to show the volume groups, devices and thin pools v1 reported (%s)", node, describeNode(want)),
			func(ctx context.Context) (bool, string, error) {
				return m.nodeAdopted(ctx, cl.Namespace, want, rec.Started)
			})
		if err != nil {
			return fmt.Errorf("node %s: %w; the node stays handed over: run lvms migrate apply again to keep waiting, or lvms migrate rollback to hand every node back", node, err)
		}
		rec.HandedOver = append(rec.HandedOver, node)
		if len(rec.HandedOver) == len(rec.Nodes) {
			rec.Step = StepNodesHandedOver
		}
		if err := m.saveRecord(ctx, cl, rec, nil); err != nil {
			return err
		}
		m.report(Progress{Step: "hand-over", Node: node, Done: i + 1, Total: len(rec.Nodes), Message: "node " + node + " is managed by the LVMNodeSets; its volume groups were adopted"})
	}
	if rec.Step != StepNodesHandedOver { // no node at all
		rec.Step = StepNodesHandedOver
		return m.saveRecord(ctx, cl, rec, nil)
	}
	return nil
}

// listNode adds node to the handed-over list of every planned set that selects it.
func (m *Migrator) listNode(ctx context.Context, ns, node string, p *plan.Plan) error {
	var n corev1.Node
	if err := m.Client.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return fmt.Errorf("get Node %s: %w", node, err)
	}
	listed := false
	for i := range p.NodeSets {
		ok, err := selects(&p.NodeSets[i], &n)
		if err != nil {
			return fmt.Errorf("LVMNodeSet %s: %w", p.NodeSets[i].Name, err)
		}
		if !ok {
			continue
		}
		listed = true
		var cur lvmv2.LVMNodeSet
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.NodeSets[i].Name}, &cur); err != nil {
			return fmt.Errorf("get LVMNodeSet %s/%s: %w", ns, p.NodeSets[i].Name, err)
		}
		nodes := names.HandedOverNodes(cur.Annotations)
		if slices.Contains(nodes, node) {
			continue
		}
		if err := m.setHandedOver(ctx, &cur, append(nodes, node)); err != nil {
			return err
		}
	}
	if !listed {
		return fmt.Errorf("node %s is managed by the LVMCluster but no planned LVMNodeSet selects it: fix the plan's node selectors (lvms migrate preflight names such nodes)", node)
	}
	return nil
}

// setHandedOver writes a set's handed-over list (sorted; an empty list removes the annotation).
func (m *Migrator) setHandedOver(ctx context.Context, set *lvmv2.LVMNodeSet, nodes []string) error {
	nodes = sorted(nodes)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(lvmv2.GroupVersion.String())
	u.SetKind("LVMNodeSet")
	u.SetNamespace(set.Namespace)
	u.SetName(set.Name)
	if len(nodes) > 0 {
		u.SetAnnotations(map[string]string{names.HandedOverNodesAnnotation: strings.Join(nodes, ",")})
	}
	if err := apply.Unstructured(ctx, m.Client, u, handOverFieldOwner, true); err != nil {
		return fmt.Errorf("write %s of LVMNodeSet %s/%s: %w", names.HandedOverNodesAnnotation, set.Namespace, set.Name, err)
	}
	return nil
}

// nodeAdopted reports whether the node's LVMNode status shows want: every volume group Healthy with the
// same devices and thin pools, on the latest spec. A device wiped since the migration started is an error:
// the volume group was not adopted.
func (m *Migrator) nodeAdopted(ctx context.Context, ns string, want NodeStorage, since time.Time) (bool, string, error) {
	var n lvmv2.LVMNode
	switch err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: want.Name}, &n); {
	case apierrors.IsNotFound(err):
		return false, "no LVMNode yet", nil
	case err != nil:
		return false, "", fmt.Errorf("get LVMNode %s/%s: %w", ns, want.Name, err)
	}
	for _, vg := range n.Status.VolumeGroups {
		for _, d := range vg.Devices.Included {
			if d.Wiped != nil && !d.Wiped.Time.Before(since) {
				return false, "", fmt.Errorf("node %s: device %s of volume group %s was wiped at %s, after the migration started: the volume group was not adopted; run lvms migrate rollback and report this",
					want.Name, d.KName, vg.Name, d.Wiped.UTC().Format(time.RFC3339))
			}
		}
	}
	if n.Status.ObservedGeneration < n.Generation {
		return false, fmt.Sprintf("the node agent has not acted on generation %d of LVMNode %s yet (it reported generation %d)", n.Generation, n.Name, n.Status.ObservedGeneration), nil
	}
	var gaps []string
	for _, w := range want.VolumeGroups {
		i := slices.IndexFunc(n.Status.VolumeGroups, func(v lvmv2.VolumeGroupStatus) bool { return v.Name == w.Name })
		if i < 0 {
			gaps = append(gaps, "volume group "+w.Name+" is not reported")
			continue
		}
		if st := n.Status.VolumeGroups[i]; st.State != lvmv2.StateHealthy {
			gaps = append(gaps, fmt.Sprintf("volume group %s is %s: %s", w.Name, st.State, st.Message))
		}
	}
	got := v2Node(&n, want)
	for _, d := range diff(Snapshot{Nodes: []NodeStorage{{Name: want.Name, VolumeGroups: want.VolumeGroups}}}, Snapshot{Nodes: []NodeStorage{got}}) {
		if !strings.Contains(d, "is missing") {
			gaps = append(gaps, d)
		}
	}
	if len(gaps) > 0 {
		return false, strings.Join(gaps, "; "), nil
	}
	return true, "", nil
}

func describeNode(n NodeStorage) string {
	var parts []string
	for _, vg := range n.VolumeGroups {
		s := "volume group " + vg.Name + " on " + strings.Join(vg.Devices, ", ")
		if len(vg.ThinPools) > 0 {
			s += " with thin pool " + strings.Join(vg.ThinPools, ", ")
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no volume group"
	}
	return strings.Join(parts, "; ")
}

// adoptClasses waits until the operator moved every planned class to its set: the same object (UID), now
// labelled for the set.
func (m *Migrator) adoptClasses(ctx context.Context, cl *lvmv1.LVMCluster, rec *Record, p *plan.Plan) error {
	m.report(Progress{Step: "adopt-classes", Total: 1, Message: "waiting for the LVMNodeSets to adopt the StorageClasses and VolumeSnapshotClasses in place"})
	err := m.waitFor(ctx, "the LVMNodeSets to adopt the classes", func(ctx context.Context) (bool, string, error) {
		gaps, err := m.classGaps(ctx, p, rec, names.KindNodeSet)
		return len(gaps) == 0, strings.Join(gaps, "; "), err
	})
	if err != nil {
		return err
	}
	rec.Step = StepClassesAdopted
	if err := m.saveRecord(ctx, cl, rec, nil); err != nil {
		return err
	}
	m.report(Progress{Step: "adopt-classes", Done: 1, Total: 1, Message: "the LVMNodeSets own the classes (same objects, same parameters)"})
	return nil
}

// classGaps says which planned classes are not yet owned as wanted: by their set (kind LVMNodeSet) or by
// the LVMCluster. A class recreated (another UID than recorded) is an error: that must never happen.
func (m *Migrator) classGaps(ctx context.Context, p *plan.Plan, rec *Record, kind string) ([]string, error) {
	var gaps []string
	check := func(what, name string, obj client.Object, recorded []Class, ownerName string) error {
		switch err := m.Client.Get(ctx, client.ObjectKey{Name: name}, obj); {
		case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err), runtime.IsNotRegisteredError(err):
			if slices.ContainsFunc(recorded, func(c Class) bool { return c.Name == name }) {
				return fmt.Errorf("%s %s was deleted during the migration; recreate it from the LVMCluster's settings before going on", what, name)
			}
			return nil // the cluster never had it: the set creates it
		case err != nil:
			return fmt.Errorf("get %s %s: %w", what, name, err)
		}
		if i := slices.IndexFunc(recorded, func(c Class) bool { return c.Name == name }); i >= 0 && recorded[i].UID != string(obj.GetUID()) {
			return fmt.Errorf("%s %s was recreated during the migration (UID %s, recorded %s); it should have been adopted in place", what, name, obj.GetUID(), recorded[i].UID)
		}
		l := obj.GetLabels()
		if l[names.OwnerKindLabel] != kind || l[names.OwnerNameLabel] != ownerName || l[names.OwnerNamespaceLabel] != p.Namespace {
			gaps = append(gaps, fmt.Sprintf("%s %s belongs to %s %s", what, name, l[names.OwnerKindLabel], l[names.OwnerNameLabel]))
		}
		return nil
	}
	var errs []error
	for _, mp := range p.Mappings {
		owner := mp.NodeSet
		if kind == names.KindCluster {
			owner = p.Name
		}
		errs = append(errs, check("StorageClass", mp.StorageClass, &storagev1.StorageClass{}, rec.Before.StorageClasses, owner))
		if mp.SnapshotClass != "" {
			errs = append(errs, check("VolumeSnapshotClass", mp.SnapshotClass, &snapshotv1.VolumeSnapshotClass{}, rec.Before.SnapshotClasses, owner))
		}
	}
	return gaps, errors.Join(errs...)
}

// removeCluster copies the record onto the sets (the LVMCluster and its annotation are about to go), then
// deletes the LVMCluster, which keeps its storage because it is marked.
func (m *Migrator) removeCluster(ctx context.Context, cl *lvmv1.LVMCluster, rec *Record) error {
	final := *rec
	final.Step = StepClusterRemoved
	value, err := final.Encode()
	if err != nil {
		return err
	}
	sets, err := m.migratedSets(ctx, cl.Namespace, cl.Name)
	if err != nil {
		return err
	}
	for i := range sets {
		s := &sets[i]
		if s.Annotations[names.MigrationStateAnnotation] == value {
			continue
		}
		base := s.DeepCopy()
		s.Annotations[names.MigrationStateAnnotation] = value
		if err := m.Client.Patch(ctx, s, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("copy the migration record to LVMNodeSet %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	m.report(Progress{Step: "remove-cluster", Total: 1, Message: fmt.Sprintf("removing LVMCluster %s/%s; its volume groups, volumes and classes stay", cl.Namespace, cl.Name)})
	uid := cl.UID
	if err := m.Client.Delete(ctx, cl, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete LVMCluster %s/%s: %w", cl.Namespace, cl.Name, err)
	}
	return m.awaitRemoval(ctx, cl)
}

// awaitRemoval waits until the LVMCluster is gone.
func (m *Migrator) awaitRemoval(ctx context.Context, cl *lvmv1.LVMCluster) error {
	err := m.waitFor(ctx, fmt.Sprintf("LVMCluster %s/%s to be removed", cl.Namespace, cl.Name), func(ctx context.Context) (bool, string, error) {
		cur, err := m.getCluster(ctx, cl.Namespace, cl.Name)
		if err != nil || cur == nil {
			return cur == nil, "", err
		}
		return false, cur.Status.Message, nil
	})
	if err != nil {
		return fmt.Errorf("%w; the removal goes on in the cluster: run lvms migrate apply again to follow it", err)
	}
	m.report(Progress{Step: "done", Done: 1, Total: 1, Message: fmt.Sprintf("LVMCluster %s/%s is removed; the migration is complete (lvms migrate verify compares before and after)", cl.Namespace, cl.Name)})
	return nil
}

// applyConfig is set as an apply configuration with the migration's annotation only (never the
// handed-over-nodes list, which handOverFieldOwner writes).
func applyConfig(c client.Client, set *lvmv2.LVMNodeSet) (*unstructured.Unstructured, error) {
	set = set.DeepCopy()
	set.Annotations = map[string]string{names.MigratedFromAnnotation: set.Annotations[names.MigratedFromAnnotation]}
	return apply.Config(c.Scheme(), set)
}
