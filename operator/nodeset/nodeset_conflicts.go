package nodeset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/apply"
	"github.com/lvms-dev/lvms/operator/claims"
	"github.com/lvms-dev/lvms/operator/inventory"
	"github.com/lvms-dev/lvms/operator/names"
)

// nodeConflictMessages collects, for one node, the conflicts its managers keep it through, as sentences
// about the LVMNode, sorted.
func nodeConflictMessages(all claims.Result, node string) []string {
	var out []string
	add := func(keeper string, c claims.Conflict) {
		if c.Node != node || !c.Kept {
			return
		}
		m := fmt.Sprintf("%s %s also claims this node (%s) but %s manages it; %s leaves it alone until the conflict is resolved",
			c.WithKind, c.With, c.Overlap, keeper, c.With)
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	for name, a := range all.NodeSets {
		for _, c := range a.Conflicts {
			add("LVMNodeSet "+name, c)
		}
	}
	if all.Cluster != nil {
		for _, c := range all.Cluster.Conflicts {
			add("the LVMCluster", c)
		}
	}
	slices.Sort(out)
	return out
}

// reconcileConflictConditions writes the NoConflicts condition of the LVMNodes the set manages, through the
// status subresource with its own field manager, so it sits beside the node agent's conditions. Only the
// first owning set (by name) writes it, and only when it changes.
func (r *Reconciler) reconcileConflictConditions(ctx context.Context, s *scope) error {
	var errs []error
	for _, name := range s.assignment.Managed {
		n := s.inv.LVMNodes[name]
		if n == nil {
			continue
		}
		owners := inventory.NodeSetOwners(n)
		if len(owners) == 0 || owners[0] != s.set.Name {
			continue
		}
		msgs := nodeConflictMessages(s.all, name)
		var cur *metav1.Condition
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == lvmv2.ConditionNoConflicts {
				cur = &n.Status.Conditions[i]
			}
		}
		want := metav1.Condition{Type: lvmv2.ConditionNoConflicts, Status: metav1.ConditionTrue, Reason: ReasonNoConflicts,
			Message: "no other LVMNodeSet or LVMCluster claims this node", ObservedGeneration: n.Generation}
		if len(msgs) > 0 {
			want.Status, want.Reason, want.Message = metav1.ConditionFalse, ReasonConflict, strings.Join(msgs, "; ")
		}
		switch {
		case cur == nil && len(msgs) == 0:
			continue
		case cur != nil && cur.Status == want.Status && cur.Message == want.Message && cur.Reason == want.Reason:
			continue
		}
		want.LastTransitionTime = metav1.NewTime(s.now)
		if cur != nil && cur.Status == want.Status {
			want.LastTransitionTime = cur.LastTransitionTime
		}
		if err := r.applyNodeCondition(ctx, n, want); err != nil {
			errs = append(errs, err)
			continue
		}
		if r.Recorder != nil && want.Status == metav1.ConditionFalse {
			r.Recorder.Eventf(n, s.set, corev1.EventTypeWarning, ReasonConflict, "Claim", "%s", truncate(want.Message))
		}
	}
	return errors.Join(errs...)
}

func (r *Reconciler) applyNodeCondition(ctx context.Context, n *lvmv2.LVMNode, c metav1.Condition) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(lvmv2.GroupVersion.String())
	u.SetKind("LVMNode")
	u.SetName(n.Name)
	u.SetNamespace(n.Namespace)
	cond := map[string]any{
		"type":               c.Type,
		"status":             string(c.Status),
		"reason":             c.Reason,
		"message":            c.Message,
		"observedGeneration": c.ObservedGeneration,
		"lastTransitionTime": c.LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z"),
	}
	u.Object["status"] = map[string]any{"conditions": []any{cond}}
	return apply.Status(ctx, r.Client, u, names.FieldOwner, true)
}
