package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/nodeagent/status"
	"github.com/lvms-dev/lvms/nodeagent/volumegroup"
)

func (a *Agent) statusInputs(in *inputs, p *pass) status.Inputs {
	node := *p.node
	node.External = in.desired.External
	return status.Inputs{Node: &node, Outcome: p.outcome, Observation: p.obs, Capabilities: p.caps, LVMD: p.lvmd,
		External: p.external, Shared: a.sharedStatus(), Now: metav1.NewTime(a.opts.Clock.Now().UTC().Truncate(1e9))}
}

// publish writes LVMNode.status and LVMVolumeGroupNodeStatus when they changed.
func (a *Agent) publish(ctx context.Context, in *inputs, p *pass) error {
	si := a.statusInputs(in, p)
	if in.lvmNode != nil {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			next := status.LVMNode(in.lvmNode.Status, si)
			if equality.Semantic.DeepEqual(next, in.lvmNode.Status) {
				return nil
			}
			orig := in.lvmNode.DeepCopy()
			in.lvmNode.Status = next
			err := a.c.Status().Patch(ctx, in.lvmNode, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
			if apierrors.IsConflict(err) {
				// Someone else (the operator) wrote the object: build the status again on the fresh one.
				if gerr := a.c.Get(ctx, client.ObjectKeyFromObject(in.lvmNode), in.lvmNode); gerr != nil {
					return gerr
				}
			}
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("write the status of LVMNode %s: %w", in.lvmNode.Name, err)
		}
	}
	return a.publishNodeStatus(ctx, in, si)
}

// publishNodeStatus creates or updates the node's LVMVolumeGroupNodeStatus (LVMS's v1 view) while the v1
// API is in use on the node, or when the object exists already (the operator may create it).
func (a *Agent) publishNodeStatus(ctx context.Context, in *inputs, si status.Inputs) error {
	key := types.NamespacedName{Namespace: a.opts.Namespace, Name: a.opts.NodeName}
	var ns lvmv1.LVMVolumeGroupNodeStatus
	err := a.c.Get(ctx, key, &ns)
	exists := err == nil
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("get LVMVolumeGroupNodeStatus %s: %w", key, err)
	case !exists && !in.v1:
		return nil
	case exists && ns.DeletionTimestamp != nil:
		return nil
	}
	spec, _ := status.NodeStatus(ns.Status.Conditions, ns.Generation, si)
	nf := status.NodeFacts(si)
	nf.Agent = &lvmv1.AgentFacts{Version: a.opts.Version, Capabilities: []string{lvmv1.CapabilityAdoptVolumeGroups}}
	facts := nf.String()
	if !exists {
		ns = lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Annotations: map[string]string{lvmv1.NodeFactsAnnotation: facts}}, Spec: spec}
		if in.node != nil {
			// Gone with its Node: a node that leaves the cluster leaves no stale status behind.
			ns.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: in.node.Name, UID: in.node.UID}}
		}
		if err := a.c.Create(ctx, &ns); err != nil {
			return fmt.Errorf("create LVMVolumeGroupNodeStatus %s: %w", key, err)
		}
	} else if !equality.Semantic.DeepEqual(spec, ns.Spec) || ns.Annotations[lvmv1.NodeFactsAnnotation] != facts {
		ns.Spec = spec
		if ns.Annotations == nil {
			ns.Annotations = map[string]string{}
		}
		ns.Annotations[lvmv1.NodeFactsAnnotation] = facts
		if err := a.c.Update(ctx, &ns); err != nil {
			return fmt.Errorf("update LVMVolumeGroupNodeStatus %s: %w", key, err)
		}
	}
	_, st := status.NodeStatus(ns.Status.Conditions, ns.Generation, si)
	if equality.Semantic.DeepEqual(st, ns.Status) {
		return nil
	}
	ns.Status = st
	if err := a.c.Status().Update(ctx, &ns); err != nil {
		return fmt.Errorf("write the status of LVMVolumeGroupNodeStatus %s: %w", key, err)
	}
	return nil
}

// emitEvents records the pass's events on the objects the volume groups come from.
func (a *Agent) emitEvents(in *inputs, p *pass) {
	if a.recorder == nil {
		return
	}
	for i := range p.node.VolumeGroups {
		if i >= len(p.outcome.VolumeGroups) {
			break
		}
		obj := in.sourceObject(&p.node.VolumeGroups[i])
		if obj == nil {
			continue
		}
		for _, e := range p.outcome.VolumeGroups[i].Events {
			typ := corev1.EventTypeNormal
			if e.Warning {
				typ = corev1.EventTypeWarning
			}
			a.recorder.Eventf(obj, nil, typ, e.Reason, action(e), "%s", "node "+a.opts.NodeName+": "+e.Message)
		}
	}
}

func action(e volumegroup.Event) string {
	if e.Warning {
		return "Reconcile"
	}
	return e.Reason
}
