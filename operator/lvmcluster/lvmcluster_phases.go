package lvmcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/api/nodeselect"
	"github.com/lvms-dev/lvms/operator/apply"
	"github.com/lvms-dev/lvms/operator/classes"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/noderemoval"
	"github.com/lvms-dev/lvms/operator/usage"
)

// ownerRef makes the LVMCluster the controller of what it generates in its namespace.
func ownerRef(c *lvmv1.LVMCluster) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion: lvmv1.GroupVersion.String(), Kind: names.KindCluster, Name: c.Name, UID: c.UID,
		Controller: &t, BlockOwnerDeletion: &t,
	}
}

func labels(c *lvmv1.LVMCluster) map[string]string {
	return map[string]string{
		names.ManagedByLabel:      names.ManagedByValue,
		names.OwnerKindLabel:      names.KindCluster,
		names.OwnerNamespaceLabel: c.Namespace,
		names.OwnerNameLabel:      c.Name,
	}
}

func controlledBy(o metav1.Object, c *lvmv1.LVMCluster) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == c.UID
}

// desiredVolumeGroup is the LVMVolumeGroup of one device class. Its node selector leaves out the nodes the
// class selects but the LVMCluster does not manage (an LVMNodeSet does, or they were handed over).
func desiredVolumeGroup(c *lvmv1.LVMCluster, dc lvmv1.DeviceClass, excluded []string) *lvmv1.LVMVolumeGroup {
	shared := dc.DeviceAccessPolicy.Normalized() == lvmv1.DeviceAccessPolicyShared
	vg := &lvmv1.LVMVolumeGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name: dc.Name, Namespace: c.Namespace, Labels: labels(c),
			OwnerReferences: []metav1.OwnerReference{ownerRef(c)},
		},
		Spec: lvmv1.LVMVolumeGroupSpec{
			DeviceSelector:        dc.DeviceSelector.DeepCopy(),
			NodeSelector:          nodeselect.Exclude(dc.NodeSelector, excluded),
			ThinPoolConfig:        dc.ThinPoolConfig.DeepCopy(),
			RAIDConfig:            dc.RAIDConfig.DeepCopy(),
			Default:               c.Spec.Storage.IsDefault(dc),
			DeviceDiscoveryPolicy: dc.DeviceDiscoveryPolicy,
			DeviceAccessPolicy:    dc.DeviceAccessPolicy.Normalized(),
			FilesystemType:        dc.FilesystemType,
		},
	}
	if vg.Spec.FilesystemType == "" && !shared {
		vg.Spec.FilesystemType = lvmv1.FilesystemXFS
	}
	return vg
}

// reconcileVolumeGroups applies one LVMVolumeGroup per device class and deletes those of removed classes.
func (r *Reconciler) reconcileVolumeGroups(ctx context.Context, s *scope) {
	c := s.cluster
	var list lvmv1.LVMVolumeGroupList
	if err := r.Client.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		s.applyErrs = append(s.applyErrs, fmt.Errorf("list LVMVolumeGroups: %w", err))
		return
	}
	existing := map[string]*lvmv1.LVMVolumeGroup{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	wanted := map[string]bool{}
	for _, dc := range c.Spec.Storage.DeviceClasses {
		wanted[dc.Name] = true
		if cur := existing[dc.Name]; cur != nil && !controlledBy(cur, c) {
			s.applyErrs = append(s.applyErrs, fmt.Errorf("LVMVolumeGroup %s exists and does not belong to this LVMCluster; delete it or rename the device class", dc.Name))
			continue
		}
		var excluded []string
		for _, node := range s.inv.ClassNodes[dc.Name] {
			if !contains(s.assignment.Managed, node) {
				excluded = append(excluded, node)
			}
		}
		vg := desiredVolumeGroup(c, dc, excluded)
		if cur := existing[dc.Name]; cur != nil {
			blocked, err := r.removalBlocked(ctx, s, cur)
			if err != nil {
				s.applyErrs = append(s.applyErrs, err)
				continue // never apply a selector that could drop a node still holding volumes
			}
			keepNodes(vg, sortedKeys(blocked))
			for _, node := range sortedKeys(blocked) {
				s.removing = append(s.removing, blocked[node])
			}
		}
		if cur := existing[dc.Name]; cur != nil && upToDate(cur, vg) {
			continue // no write at every reconcile for what is already there
		}
		if err := apply.Object(ctx, r.Client, vg, names.FieldOwner, true); err != nil {
			s.applyErrs = append(s.applyErrs, err)
		}
	}
	for _, name := range sortedKeys(existing) {
		vg := existing[name]
		if wanted[name] || !controlledBy(vg, c) {
			continue
		}
		if msg, err := r.deleteVolumeGroup(ctx, vg); err != nil {
			s.applyErrs = append(s.applyErrs, err)
		} else if msg != "" {
			s.removing = append(s.removing, msg)
		}
	}
}

// upToDate says whether cur already has what applying want would set: its spec, labels and owner. A spec
// the API server filled with defaults want leaves empty compares unequal and is applied again (harmless).
func upToDate(cur, want *lvmv1.LVMVolumeGroup) bool {
	for k, v := range want.Labels {
		if cur.Labels[k] != v {
			return false
		}
	}
	return equality.Semantic.DeepEqual(cur.Spec, want.Spec) &&
		slices.ContainsFunc(cur.OwnerReferences, func(ref metav1.OwnerReference) bool { return equality.Semantic.DeepEqual(ref, want.OwnerReferences[0]) })
}

// removalBlocked maps the nodes that left the device class's node selector while PVs of its StorageClass
// live there to the message naming them: the volume group stays on them (the agent would remove it once
// the selector no longer matches). A node counts when its agent set the volume group up (its finalizer).
func (r *Reconciler) removalBlocked(ctx context.Context, s *scope, vg *lvmv1.LVMVolumeGroup) (map[string]string, error) {
	out := map[string]string{}
	var scNames []string
	for _, sc := range classes.ForCluster(s.cluster, r.Names).StorageClasses {
		if sc.DeviceClass == vg.Name {
			scNames = append(scNames, sc.Name)
		}
	}
	for _, node := range s.inv.NodeNames {
		if contains(s.inv.ClassNodes[vg.Name], node) ||
			!slices.ContainsFunc(vg.Finalizers, func(f string) bool { return noderemoval.IsNodeFinalizer(f, node) }) {
			continue
		}
		msg, err := usage.NodeBlockers(ctx, r.Client, scNames, node, r.Names.TopologyKey(), maxListed)
		if err != nil {
			return nil, err
		}
		if msg != "" {
			out[node] = "device class " + vg.Name + ": " + msg
		}
	}
	return out, nil
}

// keepNodes adds a term selecting exactly nodes to vg's node selector, so the node agents there keep it.
func keepNodes(vg *lvmv1.LVMVolumeGroup, nodes []string) {
	if len(nodes) == 0 || vg.Spec.NodeSelector == nil {
		return // a nil selector already selects every node
	}
	vg.Spec.NodeSelector.NodeSelectorTerms = append(vg.Spec.NodeSelector.NodeSelectorTerms, corev1.NodeSelectorTerm{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: nodes}},
	})
}

// deleteVolumeGroup deletes an LVMVolumeGroup and says what its removal waits for ("" once it is gone).
func (r *Reconciler) deleteVolumeGroup(ctx context.Context, vg *lvmv1.LVMVolumeGroup) (string, error) {
	if vg.DeletionTimestamp == nil {
		if err := r.Client.Delete(ctx, vg); err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("delete LVMVolumeGroup %s: %w", vg.Name, err)
		}
	}
	if len(vg.Finalizers) == 0 {
		return "", nil
	}
	return fmt.Sprintf("device class %s: waiting for the node agents to remove the volume group (finalizers %s); a node that is gone for good releases its finalizer when its Node object is deleted",
		vg.Name, strings.Join(vg.Finalizers, ", ")), nil
}

// reconcileNodeStatuses makes sure every managed node has its LVMVolumeGroupNodeStatus, owned by the
// LVMCluster. Only metadata is applied: the node agent owns what it reports.
func (r *Reconciler) reconcileNodeStatuses(ctx context.Context, s *scope) {
	c := s.cluster
	for _, node := range s.assignment.Managed {
		if st := s.inv.NodeStatuses[node]; st != nil && controlledBy(st, c) {
			continue
		}
		if s.inv.Nodes[node] == nil {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(lvmv1.GroupVersion.String())
		u.SetKind("LVMVolumeGroupNodeStatus")
		u.SetName(node)
		u.SetNamespace(c.Namespace)
		u.SetLabels(labels(c))
		u.SetOwnerReferences([]metav1.OwnerReference{ownerRef(c)})
		if err := apply.Unstructured(ctx, r.Client, u, names.FieldOwner, true); err != nil {
			s.applyErrs = append(s.applyErrs, err)
		}
	}
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func truncate(s string) string {
	const max = 1000
	if len(s) <= max {
		return s
	}
	return s[:max-3] + "..."
}
