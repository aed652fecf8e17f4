package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/desired"
)

// LVMNodeFinalizer keeps an LVMNode until its agent removed (or released) its volume groups.
const LVMNodeFinalizer = "lvm.topolvm.io/node-agent"

// VolumeGroupFinalizer is the per-node finalizer on LVMVolumeGroups; it is the name lvm-operator's
// vg-manager uses, so that objects created before a migration keep working.
func VolumeGroupFinalizer(node string) string {
	return "cleanup.vgmanager.node.topolvm.io/" + shortName(node)
}

// inputs are the API objects one pass reads.
type inputs struct {
	node     *corev1.Node   // nil when the Node object does not exist
	lvmNode  *lvmv2.LVMNode // nil without one
	vgs      []lvmv1.LVMVolumeGroup
	clusters []lvmv1.LVMCluster // the managed one only
	managed  *lvmv1.LVMCluster  // nil without an LVMCluster
	desired  *desired.Node
	// v1 is true when the v1 API is in use on the node (an LVMCluster in the namespace or an
	// LVMVolumeGroup for the node): the agent then keeps LVMVolumeGroupNodeStatus.
	v1 bool
}

func (a *Agent) fetch(ctx context.Context) (*inputs, error) {
	in := &inputs{}
	var node corev1.Node
	switch err := a.c.Get(ctx, types.NamespacedName{Name: a.opts.NodeName}, &node); {
	case err == nil:
		in.node = &node
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get Node %s: %w", a.opts.NodeName, err)
	}
	var ln lvmv2.LVMNode
	switch err := a.c.Get(ctx, types.NamespacedName{Namespace: a.opts.Namespace, Name: a.opts.NodeName}, &ln); {
	case err == nil:
		in.lvmNode = &ln
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get LVMNode %s/%s: %w", a.opts.Namespace, a.opts.NodeName, err)
	}
	var vgs lvmv1.LVMVolumeGroupList
	if err := a.c.List(ctx, &vgs, client.InNamespace(a.opts.Namespace)); err != nil {
		return nil, fmt.Errorf("list LVMVolumeGroups in %s: %w", a.opts.Namespace, err)
	}
	var clusters lvmv1.LVMClusterList
	if err := a.c.List(ctx, &clusters, client.InNamespace(a.opts.Namespace)); err != nil {
		return nil, fmt.Errorf("list LVMClusters in %s: %w", a.opts.Namespace, err)
	}
	managed := managedCluster(clusters.Items)
	if managed != nil {
		in.managed = managed
		in.clusters = []lvmv1.LVMCluster{*managed}
	}
	fin := VolumeGroupFinalizer(a.opts.NodeName)
	for _, vg := range vgs.Items {
		// The managed cluster's volume groups for this node, and any it still holds a finalizer on (to
		// let them go when they are deleted).
		if (ownedBy(&vg, managed) && desired.MatchesNode(vg.Spec.NodeSelector, in.node)) || controllerutil.ContainsFinalizer(&vg, fin) {
			in.vgs = append(in.vgs, vg)
		}
	}
	v1 := desired.FromV1(desired.V1Inputs{Node: in.node, VolumeGroups: in.managedVGs(), Clusters: in.clusters})
	var v2 *desired.Node
	if in.lvmNode != nil {
		v2 = desired.FromLVMNode(in.lvmNode)
	}
	in.desired = desired.Merge(v2, v1)
	if a.opts.ForceExternal {
		in.desired.External = true
	}
	in.v1 = len(in.clusters) > 0 || len(in.vgs) > 0 || a.opts.ForceExternal
	return in, nil
}

// managedCluster is the LVMCluster LVMS manages in the namespace: the oldest, then by name (the operator's
// rule, operator/inventory). Any other LVMCluster is refused by the operator and ignored by the agent: its
// configurationPolicy switches nothing.
func managedCluster(clusters []lvmv1.LVMCluster) *lvmv1.LVMCluster {
	if len(clusters) == 0 {
		return nil
	}
	oldest := slices.MinFunc(clusters, func(a, b lvmv1.LVMCluster) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return &oldest
}

// ownedBy reports whether the managed LVMCluster controls vg. A hand-made LVMVolumeGroup, or one of a
// refused LVMCluster, never reaches the node's disks.
func ownedBy(vg *lvmv1.LVMVolumeGroup, managed *lvmv1.LVMCluster) bool {
	return managed != nil && metav1.IsControlledBy(vg, managed)
}

func (in *inputs) isManaged(vg *lvmv1.LVMVolumeGroup) bool { return ownedBy(vg, in.managed) }

// managedVGs are the volume groups the agent acts on: the managed cluster's, for this node.
func (in *inputs) managedVGs() []lvmv1.LVMVolumeGroup {
	var out []lvmv1.LVMVolumeGroup
	for _, vg := range in.vgs {
		if in.isManaged(&vg) && desired.MatchesNode(vg.Spec.NodeSelector, in.node) {
			out = append(out, vg)
		}
	}
	return out
}

// ensureFinalizers puts the agent's finalizer on the objects whose volume groups it manages, before it
// creates anything, so that their deletion waits for the agent.
func (a *Agent) ensureFinalizers(ctx context.Context, in *inputs) error {
	if in.lvmNode != nil && in.lvmNode.DeletionTimestamp == nil && len(in.lvmNode.Spec.VolumeGroups) > 0 {
		if err := a.addFinalizer(ctx, in.lvmNode, LVMNodeFinalizer); err != nil {
			return err
		}
	}
	fin := VolumeGroupFinalizer(a.opts.NodeName)
	for i := range in.vgs {
		vg := &in.vgs[i]
		if vg.DeletionTimestamp != nil || !desired.MatchesNode(vg.Spec.NodeSelector, in.node) || !in.isManaged(vg) {
			continue
		}
		if err := a.addFinalizer(ctx, vg, fin); err != nil {
			return err
		}
	}
	return nil
}

func (a *Agent) addFinalizer(ctx context.Context, obj client.Object, fin string) error {
	if controllerutil.ContainsFinalizer(obj, fin) {
		return nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, fin)
	if err := a.c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer %s to %s %s: %w", fin, obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return nil
}

func (a *Agent) removeFinalizer(ctx context.Context, obj client.Object, fin string) error {
	if !controllerutil.ContainsFinalizer(obj, fin) {
		return nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, fin)
	if err := a.c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from %s: %w", fin, obj.GetName(), err)
	}
	return nil
}

// releaseFinalizers lets deleted objects go once their volume groups are gone (or were never ours).
func (a *Agent) releaseFinalizers(ctx context.Context, in *inputs, p *pass) error {
	fin := VolumeGroupFinalizer(a.opts.NodeName)
	for i := range in.vgs {
		vg := &in.vgs[i]
		if vg.DeletionTimestamp == nil {
			continue
		}
		if r, ok := p.result(vg.Name, desired.SourceLVMVolumeGroup); ok && !r.deleted() {
			continue
		}
		if err := a.removeFinalizer(ctx, vg, fin); err != nil {
			return err
		}
	}
	if in.lvmNode != nil && in.lvmNode.DeletionTimestamp != nil {
		for _, vg := range in.lvmNode.Spec.VolumeGroups {
			if r, ok := p.result(vg.Name, desired.SourceLVMNode); ok && !r.deleted() {
				return nil
			}
		}
		return a.removeFinalizer(ctx, in.lvmNode, LVMNodeFinalizer)
	}
	return nil
}

// sourceObject returns the API object a desired volume group comes from.
func (in *inputs) sourceObject(vg *desired.VolumeGroup) client.Object {
	if vg.Source == desired.SourceLVMNode {
		if in.lvmNode == nil {
			return nil
		}
		return in.lvmNode
	}
	i := slices.IndexFunc(in.vgs, func(v lvmv1.LVMVolumeGroup) bool { return v.Name == vg.Object })
	if i < 0 {
		return nil
	}
	return &in.vgs[i]
}
