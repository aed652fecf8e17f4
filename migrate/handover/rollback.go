package handover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/operator/names"
)

// ErrPastTheLastStep is returned by Rollback once the LVMCluster's removal was asked for.
var ErrPastTheLastStep = errors.New("the migration is past its last step")

// Rollback hands every node back to the LVMCluster, in the reverse of the hand-over order, deletes the sets
// without touching the storage (they are marked to keep it first), and unmarks the LVMCluster. It works from
// any step before the LVMCluster's removal, and again after an interruption. p is the plan of the LVMCluster
// (for the classes it takes back).
func (m *Migrator) Rollback(ctx context.Context, ns, name string, p *plan.Plan) error {
	cl, rec, sets, err := m.loadRecord(ctx, ns, name)
	if err != nil {
		return err
	}
	switch {
	case cl == nil && len(sets) > 0:
		return fmt.Errorf("%w: LVMCluster %s/%s was removed by the migration's last step, so there is nothing to hand the nodes back to; the LVMNodeSets %s manage its volume groups, volumes and classes now", ErrPastTheLastStep, ns, name, setNames(sets))
	case cl == nil:
		return fmt.Errorf("no LVMCluster %s/%s and no LVMNodeSet migrated from it: nothing to roll back", ns, name)
	case cl.DeletionTimestamp != nil:
		return fmt.Errorf("%w: the removal of LVMCluster %s/%s is under way (a deletion cannot be undone); once it is gone the LVMNodeSets %s manage its storage", ErrPastTheLastStep, ns, name, setNames(sets))
	case rec == nil && len(sets) == 0 && !names.KeepStorage(cl.Annotations):
		// Never started, or rolled back already: the LVMCluster manages its nodes as before.
		m.report(Progress{Step: "done", Done: 1, Total: 1, Message: fmt.Sprintf("LVMCluster %s/%s is not being migrated: nothing to roll back", ns, name)})
		return nil
	case p == nil:
		return fmt.Errorf("rollback needs the plan of LVMCluster %s/%s", ns, name)
	}
	if err := m.handBack(ctx, cl, rec, sets); err != nil {
		return err
	}
	if err := m.deleteSets(ctx, ns, name, sets); err != nil {
		return err
	}
	if err := m.waitFor(ctx, "the LVMCluster to own its classes again", func(ctx context.Context) (bool, string, error) {
		r := rec
		if r == nil {
			r = &Record{}
		}
		gaps, err := m.classGaps(ctx, p, r, names.KindCluster)
		return len(gaps) == 0, strings.Join(gaps, "; "), err
	}); err != nil {
		return err
	}
	return m.unmark(ctx, ns, name)
}

func setNames(sets []lvmv2.LVMNodeSet) string {
	var out []string
	for _, s := range sets {
		out = append(out, s.Name)
	}
	if len(out) == 0 {
		return "(none left)"
	}
	return strings.Join(out, ", ")
}

// handBack removes the nodes from the sets' handed-over lists, last handed over first, and waits until the
// LVMCluster manages each again.
func (m *Migrator) handBack(ctx context.Context, cl *lvmv1.LVMCluster, rec *Record, sets []lvmv2.LVMNodeSet) error {
	nodes := handedOver(sets)
	slices.Reverse(nodes)
	for i, node := range nodes {
		m.report(Progress{Step: "hand-back", Node: node, Done: i, Total: len(nodes), Message: "handing node " + node + " back to the LVMCluster"})
		for j := range sets {
			s := &sets[j]
			list := names.HandedOverNodes(s.Annotations)
			if !slices.Contains(list, node) {
				continue
			}
			list = slices.DeleteFunc(list, func(n string) bool { return n == node })
			if err := m.setHandedOver(ctx, s, list); err != nil {
				return err
			}
			s.Annotations[names.HandedOverNodesAnnotation] = strings.Join(list, ",")
		}
		if rec != nil && slices.Contains(rec.HandedOver, node) {
			rec.HandedOver = rec.HandedOver[:slices.Index(rec.HandedOver, node)] // a prefix of Nodes stays one
			rec.Step = StepSetsCreated
			if err := m.saveRecord(ctx, cl, rec, nil); err != nil {
				return err
			}
		}
		if err := m.waitFor(ctx, "the LVMCluster to manage node "+node+" again", func(ctx context.Context) (bool, string, error) {
			return m.clusterManages(ctx, cl, node)
		}); err != nil {
			return err
		}
		m.report(Progress{Step: "hand-back", Node: node, Done: i + 1, Total: len(nodes), Message: "node " + node + " is managed by the LVMCluster again"})
	}
	return nil
}

// clusterManages reports whether the LVMCluster's LVMVolumeGroupNodeStatus of node is its own and its
// status lists the node again.
func (m *Migrator) clusterManages(ctx context.Context, cl *lvmv1.LVMCluster, node string) (bool, string, error) {
	cur, err := m.getCluster(ctx, cl.Namespace, cl.Name)
	if err != nil || cur == nil {
		return false, "", errors.Join(err, fmt.Errorf("LVMCluster %s/%s disappeared", cl.Namespace, cl.Name))
	}
	for _, dc := range cur.Status.DeviceClassStatuses {
		for _, ns := range dc.NodeStatus {
			if ns.Node == node {
				return true, "", nil
			}
		}
	}
	return false, fmt.Sprintf("LVMCluster status: %s %s", cur.Status.State, cur.Status.Message), nil
}

// deleteSets marks every set migrated from the LVMCluster to keep its storage, deletes it and waits until
// it is gone.
func (m *Migrator) deleteSets(ctx context.Context, ns, cluster string, sets []lvmv2.LVMNodeSet) error {
	for i := range sets {
		s := &sets[i]
		m.report(Progress{Step: "delete-sets", Done: i, Total: len(sets), Message: fmt.Sprintf("deleting LVMNodeSet %s/%s without touching the storage", ns, s.Name)})
		if !names.KeepStorage(s.Annotations) {
			base := s.DeepCopy()
			s.Annotations[names.KeepStorageOnDeleteAnnotation] = "true"
			if err := m.Client.Patch(ctx, s, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("mark LVMNodeSet %s/%s to keep the storage: %w", ns, s.Name, err)
			}
		}
		if s.DeletionTimestamp == nil {
			uid := s.UID
			if err := m.Client.Delete(ctx, s, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete LVMNodeSet %s/%s: %w", ns, s.Name, err)
			}
		}
	}
	return m.waitFor(ctx, "the LVMNodeSets to be gone", func(ctx context.Context) (bool, string, error) {
		left, err := m.migratedSets(ctx, ns, cluster)
		if err != nil || len(left) == 0 {
			return len(left) == 0, "", err
		}
		return false, fmt.Sprintf("LVMNodeSet %s: %s", left[0].Name, left[0].Status.Message), nil
	})
}

// unmark removes the keep mark and the record from the LVMCluster: it is an ordinary LVMCluster again.
func (m *Migrator) unmark(ctx context.Context, ns, name string) error {
	cl, err := m.getCluster(ctx, ns, name)
	if err != nil || cl == nil {
		return errors.Join(err, fmt.Errorf("LVMCluster %s/%s disappeared during the rollback", ns, name))
	}
	if _, marked := cl.Annotations[names.KeepStorageOnDeleteAnnotation]; marked || cl.Annotations[names.MigrationStateAnnotation] != "" {
		base := cl.DeepCopy()
		delete(cl.Annotations, names.KeepStorageOnDeleteAnnotation)
		delete(cl.Annotations, names.MigrationStateAnnotation)
		if err := m.Client.Patch(ctx, cl, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("unmark LVMCluster %s/%s: %w", ns, name, err)
		}
	}
	m.report(Progress{Step: "done", Done: 1, Total: 1, Message: fmt.Sprintf("LVMCluster %s/%s manages all its nodes again; no LVMNodeSet of the migration is left", ns, name)})
	return nil
}
