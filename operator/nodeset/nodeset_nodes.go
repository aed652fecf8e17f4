package nodeset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/apply"
	"github.com/lvms-dev/lvms/operator/classes"
	"github.com/lvms-dev/lvms/operator/inventory"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/usage"
)

// applyWorkers bounds how many LVMNodes one reconcile applies at once.
const applyWorkers = 8

// reconcileNodes makes the set's part of the LVMNode of every node in managed match the template, and
// withdraws the set from every other LVMNode it owns — except nodes it lost in a conflict or waits for,
// which it leaves exactly as they are.
func (r *Reconciler) reconcileNodes(ctx context.Context, s *scope, managed []string) error {
	var errs []error
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(applyWorkers)
	limit, applied := r.AppliesPerPass, 0
	if limit <= 0 {
		limit = DefaultAppliesPerPass
	}
	for _, name := range managed {
		if s.inv.Nodes[name] == nil || r.upToDate(s, s.inv.LVMNodes[name]) {
			continue
		}
		s.applying[name] = true
		if applied == limit {
			s.deferred++
			continue
		}
		applied++
		g.Go(func() error {
			if err := r.applyNode(ctx, s, name); err != nil {
				mu.Lock()
				errs = append(errs, err)
				s.applyErr[name] = err
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	keep := map[string]bool{}
	for _, n := range managed {
		keep[n] = true
	}
	for _, n := range s.assignment.Waiting {
		keep[n] = true
	}
	for _, c := range s.assignment.Conflicts {
		if !c.Kept {
			keep[c.Node] = true
		}
	}
	for _, name := range sortedKeys(s.inv.LVMNodes) {
		n := s.inv.LVMNodes[name]
		if keep[name] || !ownedBy(n, s.set) {
			continue
		}
		if blocked, err := r.removalBlocked(ctx, s, n); err != nil || blocked != "" {
			if err != nil {
				errs = append(errs, err)
			}
			s.removalBlocked[name] = blocked
			continue
		}
		msg, err := r.withdraw(ctx, s, n)
		if err != nil {
			errs = append(errs, err)
		}
		if msg != "" {
			s.withdrawing[name] = msg
		}
	}
	return errors.Join(errs...)
}

// removalBlocked says why the set's volume groups stay on a node that left the set while volumes of the
// set's storage classes still live there ("" when they may go). A withdrawal already under way goes on, and
// a deleted Node has no agent to remove anything (node loss is handled elsewhere).
func (r *Reconciler) removalBlocked(ctx context.Context, s *scope, n *lvmv2.LVMNode) (string, error) {
	if s.inv.Nodes[n.Name] == nil || n.DeletionTimestamp != nil || !ownsSpec(n, names.NodeSetFieldOwner(string(s.set.UID))) {
		return "", nil
	}
	scNames, err := classes.Names(ctx, r.Client, classes.ForNodeSet(s.set, r.Names))
	if err != nil {
		return "", err
	}
	return usage.NodeBlockers(ctx, r.Client, scNames, n.Name, r.Names.TopologyKey(), maxListed)
}

// desiredNode is the set's apply configuration for the LVMNode of node: its label, its owner reference and,
// unless withdrawn, its template.
func (r *Reconciler) desiredNode(s *scope, node string, withSpec bool) (*unstructured.Unstructured, error) {
	n := &lvmv2.LVMNode{
		ObjectMeta: metav1.ObjectMeta{
			Name:      node,
			Namespace: s.set.Namespace,
			Labels: map[string]string{
				names.ManagedByLabel:           names.ManagedByValue,
				names.NodeSetLabel(s.set.Name): names.NodeSetLabelValue,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         lvmv2.GroupVersion.String(),
				Kind:               names.KindNodeSet,
				Name:               s.set.Name,
				UID:                s.set.UID,
				BlockOwnerDeletion: ptrTrue(),
			}},
		},
	}
	if withSpec {
		n.Spec = *s.set.Spec.Template.DeepCopy()
	}
	u, err := apply.Config(r.Client.Scheme(), n)
	if err != nil {
		return nil, err
	}
	if !withSpec {
		delete(u.Object, "spec")
	}
	return u, nil
}

func (r *Reconciler) applyNode(ctx context.Context, s *scope, node string) error {
	u, err := r.desiredNode(s, node, true)
	if err != nil {
		return err
	}
	if err := apply.Unstructured(ctx, r.Client, u, names.NodeSetFieldOwner(string(s.set.UID)), false); err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("Applied LVMNode", "node", node)
	return nil
}

// upToDate reports whether the LVMNode already holds the set's template and ownership, and nothing stale.
func (r *Reconciler) upToDate(s *scope, n *lvmv2.LVMNode) bool {
	if n == nil || !ownedBy(n, s.set) || n.Labels[names.NodeSetLabel(s.set.Name)] != names.NodeSetLabelValue {
		return false
	}
	t := s.set.Spec.Template
	for _, vg := range t.VolumeGroups {
		i := slices.IndexFunc(n.Spec.VolumeGroups, func(v lvmv2.VolumeGroup) bool { return v.Name == vg.Name })
		if i < 0 || !equality.Semantic.DeepEqual(n.Spec.VolumeGroups[i], vg) {
			return false
		}
	}
	for _, dc := range t.DeviceClasses {
		i := slices.IndexFunc(n.Spec.DeviceClasses, func(d lvmv2.DeviceClass) bool { return d.Name == dc.Name })
		if i < 0 || !equality.Semantic.DeepEqual(n.Spec.DeviceClasses[i], dc) {
			return false
		}
	}
	if t.LVMD != nil && !equality.Semantic.DeepEqual(n.Spec.LVMD, t.LVMD) {
		return false
	}
	// Entries no current owner's template has are stale; re-applying removes them if they are ours.
	vgs, dcs := map[string]bool{}, map[string]bool{}
	for _, owner := range inventory.NodeSetOwners(n) {
		set := s.setNamed(owner)
		if set == nil {
			return false
		}
		for _, vg := range set.Spec.Template.VolumeGroups {
			vgs[vg.Name] = true
		}
		for _, dc := range set.Spec.Template.DeviceClasses {
			dcs[dc.Name] = true
		}
	}
	for _, vg := range n.Spec.VolumeGroups {
		if !vgs[vg.Name] {
			return false
		}
	}
	for _, dc := range n.Spec.DeviceClasses {
		if !dcs[dc.Name] {
			return false
		}
	}
	return true
}

// withdraw removes the set from an LVMNode and returns what that still waits for ("" when done).
//
// The node agent removes a volume group when the object it comes from is deleted, and keeps one that still
// holds logical volumes (reporting why, and keeping its finalizer). So an LVMNode the set alone owns is
// deleted with its spec intact, and the set waits until the agent let it go. On an LVMNode shared with other
// sets the set withdraws its part of the spec with server-side apply, waits until the agent acted on that,
// and then drops its owner reference.
func (r *Reconciler) withdraw(ctx context.Context, s *scope, n *lvmv2.LVMNode) (string, error) {
	owner := names.NodeSetFieldOwner(string(s.set.UID))
	nodeGone := s.inv.Nodes[n.Name] == nil
	others := slices.DeleteFunc(inventory.NodeSetOwners(n), func(o string) bool { return o == s.set.Name })
	if len(others) == 0 {
		if n.DeletionTimestamp == nil {
			uid := n.UID
			if err := r.Client.Delete(ctx, n, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
				return "", fmt.Errorf("delete LVMNode %s: %w", n.Name, err)
			}
		}
		if len(n.Finalizers) == 0 {
			return "", nil
		}
		if nodeGone {
			return fmt.Sprintf("deleting LVMNode %s of a deleted Node: releasing its finalizers", n.Name), nil
		}
		return fmt.Sprintf("removing the set's volume groups from node %s: waiting for the node agent (%s)", n.Name,
			firstNonEmpty(agentReport(n), "no report yet")), nil
	}
	if ownsSpec(n, owner) && !nodeGone {
		u, err := r.desiredNode(s, n.Name, false)
		if err != nil {
			return "", err
		}
		if err := apply.Unstructured(ctx, r.Client, u, owner, false); err != nil {
			return "", err
		}
		return fmt.Sprintf("removing the set's volume groups from node %s: waiting for the node agent", n.Name), nil
	}
	if !nodeGone {
		if wait := agentPending(n); wait != "" {
			return wait, nil
		}
		for _, vg := range n.Status.VolumeGroups {
			if !hasVG(n.Spec.VolumeGroups, vg.Name) {
				s.retained = append(s.retained, fmt.Sprintf("node %s: volume group %s was left on the node (%s): %s",
					n.Name, vg.Name, vg.State, firstNonEmpty(vg.Message, "the node agent did not remove it")))
			}
		}
	}
	empty := &unstructured.Unstructured{}
	empty.SetAPIVersion(lvmv2.GroupVersion.String())
	empty.SetKind("LVMNode")
	empty.SetName(n.Name)
	empty.SetNamespace(n.Namespace)
	if err := apply.Unstructured(ctx, r.Client, empty, owner, false); err != nil {
		return "", err
	}
	return "", nil
}

// agentReport is the node agent's own account of an LVMNode: its message, or the first volume group that
// is not gone yet.
func agentReport(n *lvmv2.LVMNode) string {
	if n.Status.Message != "" {
		return n.Status.Message
	}
	for _, vg := range n.Status.VolumeGroups {
		if vg.Message != "" {
			return fmt.Sprintf("volume group %s is %s: %s", vg.Name, vg.State, vg.Message)
		}
	}
	return ""
}

// agentPending says what the node agent still has to do after the set withdrew from n ("" when nothing):
// act on the latest spec, and finish removing every volume group no longer in it. A volume group it keeps
// because it holds data is reported Failed or Degraded; that is done too. An agent that never reported has
// nothing to remove.
func agentPending(n *lvmv2.LVMNode) string {
	if n.Status.ObservedGeneration == 0 && len(n.Status.VolumeGroups) == 0 {
		return ""
	}
	if n.Status.ObservedGeneration < n.Generation {
		return fmt.Sprintf("removing the set's volume groups from node %s: waiting for the node agent to act on generation %d (it last reported generation %d)",
			n.Name, n.Generation, n.Status.ObservedGeneration)
	}
	var busy []string
	for _, vg := range n.Status.VolumeGroups {
		if !hasVG(n.Spec.VolumeGroups, vg.Name) && (vg.State == lvmv2.StateHealthy || vg.State == lvmv2.StateProgressing) {
			busy = append(busy, vg.Name)
		}
	}
	if len(busy) > 0 {
		return fmt.Sprintf("removing volume groups %s from node %s: waiting for the node agent", strings.Join(busy, ", "), n.Name)
	}
	return ""
}

// ownsSpec reports whether the field manager owner still owns spec fields of n.
func ownsSpec(n *lvmv2.LVMNode, owner string) bool {
	for _, mf := range n.ManagedFields {
		if mf.Manager == owner && mf.Subresource == "" && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:spec"`) {
			return true
		}
	}
	return false
}

func ownedBy(n *lvmv2.LVMNode, set *lvmv2.LVMNodeSet) bool {
	for _, ref := range n.OwnerReferences {
		if ref.UID == set.UID {
			return true
		}
	}
	return false
}

func hasVG(vgs []lvmv2.VolumeGroup, name string) bool {
	return slices.ContainsFunc(vgs, func(v lvmv2.VolumeGroup) bool { return v.Name == name })
}

func (s *scope) setNamed(name string) *lvmv2.LVMNodeSet {
	if name == s.set.Name {
		return s.set
	}
	for _, set := range s.inv.NodeSets {
		if set.Name == name {
			return set
		}
	}
	return nil
}

func templateNames(set *lvmv2.LVMNodeSet) (vgs, dcs []string) {
	for _, vg := range set.Spec.Template.VolumeGroups {
		vgs = append(vgs, vg.Name)
	}
	for _, dc := range set.Spec.Template.DeviceClasses {
		dcs = append(dcs, dc.Name)
	}
	return vgs, dcs
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortSummaries(s []lvmv2.NodeSummary) {
	slices.SortFunc(s, func(a, b lvmv2.NodeSummary) int { return strings.Compare(a.Name, b.Name) })
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func dedupe(list []string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func ptrTrue() *bool { t := true; return &t }

func truncate(s string) string {
	const max = 1000
	if len(s) <= max {
		return s
	}
	return s[:max-3] + "..."
}

func conditionMessage(st lvmv2.LVMNodeSetStatus, t string) string {
	for _, c := range st.Conditions {
		if c.Type == t {
			return string(c.Status) + c.Message
		}
	}
	return ""
}
