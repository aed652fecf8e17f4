package usage

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/operator/classes"
)

// StorageClassField is the cache index of PVCs and PVs by spec.storageClassName.
const StorageClassField = "spec.storageClassName"

// Indexer registers cache indexes (a manager's GetFieldIndexer).
type Indexer interface {
	IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error
}

// SetupIndexes registers the storage class index of PVCs and PVs.
func SetupIndexes(ctx context.Context, idx Indexer) error {
	if err := idx.IndexField(ctx, &corev1.PersistentVolumeClaim{}, StorageClassField, func(o client.Object) []string {
		pvc := o.(*corev1.PersistentVolumeClaim)
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
			return nil
		}
		return []string{*pvc.Spec.StorageClassName}
	}); err != nil {
		return fmt.Errorf("index PersistentVolumeClaims by storage class: %w", err)
	}
	if err := idx.IndexField(ctx, &corev1.PersistentVolume{}, StorageClassField, func(o client.Object) []string {
		pv := o.(*corev1.PersistentVolume)
		if pv.Spec.StorageClassName == "" {
			return nil
		}
		return []string{pv.Spec.StorageClassName}
	}); err != nil {
		return fmt.Errorf("index PersistentVolumes by storage class: %w", err)
	}
	return nil
}

// Users lists, as "PersistentVolumeClaim ns/name (class)" and "PersistentVolume name (class)", sorted,
// everything that uses one of the StorageClasses named. PVs bound to a listed PVC are not listed again.
func Users(ctx context.Context, c client.Reader, storageClasses []string) ([]string, error) {
	var out []string
	claims := map[string]bool{}
	for _, sc := range storageClasses {
		var pvcs corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &pvcs, client.MatchingFields{StorageClassField: sc}); err != nil {
			return nil, fmt.Errorf("list PersistentVolumeClaims of StorageClass %s: %w", sc, err)
		}
		for _, pvc := range pvcs.Items {
			claims[pvc.Namespace+"/"+pvc.Name] = true
			out = append(out, fmt.Sprintf("PersistentVolumeClaim %s/%s (%s)", pvc.Namespace, pvc.Name, sc))
		}
	}
	for _, sc := range storageClasses {
		var pvs corev1.PersistentVolumeList
		if err := c.List(ctx, &pvs, client.MatchingFields{StorageClassField: sc}); err != nil {
			return nil, fmt.Errorf("list PersistentVolumes of StorageClass %s: %w", sc, err)
		}
		for _, pv := range pvs.Items {
			if ref := pv.Spec.ClaimRef; ref != nil && claims[ref.Namespace+"/"+ref.Name] {
				continue
			}
			out = append(out, fmt.Sprintf("PersistentVolume %s (%s, %s)", pv.Name, sc, pv.Spec.PersistentVolumeReclaimPolicy))
		}
	}
	slices.Sort(out)
	return out, nil
}

// Blockers is the deletion-blocking message for the storage classes of set (the ones it would create and the
// ones it owns), naming at most max of the PVCs and PVs that still use them, or "" when none does.
func Blockers(ctx context.Context, c client.Client, set classes.Set, max int) (string, error) {
	scNames, err := classes.Names(ctx, c, set)
	if err != nil {
		return "", err
	}
	users, err := Users(ctx, c, scNames)
	if err != nil {
		return "", err
	}
	return Message(users, max), nil
}

// Message is the status message for a deletion that waits for users (at most max of them named).
func Message(users []string, max int) string {
	if len(users) == 0 {
		return ""
	}
	return fmt.Sprintf("deletion is blocked by %d volume(s) still using the storage classes: %s; delete them (and the workloads using them) to continue",
		len(users), listSome(users, max))
}

// listSome joins at most max of users and says how many more there are.
func listSome(users []string, max int) string {
	if len(users) <= max {
		return joinSemicolon(users)
	}
	return joinSemicolon(users[:max]) + fmt.Sprintf(" and %d more", len(users)-max)
}

func joinSemicolon(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

// selectedNodeAnnotation is set by the scheduler on a WaitForFirstConsumer claim being provisioned on a node.
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// NodeUsers lists, like Users, what uses one of the StorageClasses named on one node: PVs pinned to it by
// their node affinity on topologyKey (named by their claim when they have one), and claims the scheduler
// put there that are not bound yet.
func NodeUsers(ctx context.Context, c client.Reader, storageClasses []string, node, topologyKey string) ([]string, error) {
	var out []string
	for _, sc := range storageClasses {
		var pvs corev1.PersistentVolumeList
		if err := c.List(ctx, &pvs, client.MatchingFields{StorageClassField: sc}); err != nil {
			return nil, fmt.Errorf("list PersistentVolumes of StorageClass %s: %w", sc, err)
		}
		for _, pv := range pvs.Items {
			if PVNode(&pv, topologyKey) != node {
				continue
			}
			if ref := pv.Spec.ClaimRef; ref != nil {
				out = append(out, fmt.Sprintf("PersistentVolumeClaim %s/%s (%s, PersistentVolume %s)", ref.Namespace, ref.Name, sc, pv.Name))
				continue
			}
			out = append(out, fmt.Sprintf("PersistentVolume %s (%s, %s)", pv.Name, sc, pv.Spec.PersistentVolumeReclaimPolicy))
		}
		var pvcs corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &pvcs, client.MatchingFields{StorageClassField: sc}); err != nil {
			return nil, fmt.Errorf("list PersistentVolumeClaims of StorageClass %s: %w", sc, err)
		}
		for _, pvc := range pvcs.Items {
			if pvc.Spec.VolumeName == "" && pvc.Annotations[selectedNodeAnnotation] == node {
				out = append(out, fmt.Sprintf("PersistentVolumeClaim %s/%s (%s, being provisioned)", pvc.Namespace, pvc.Name, sc))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// NodeBlockers is the message for removing volume groups from node while volumes of storageClasses live
// there, naming at most max of them, or "" when none does.
func NodeBlockers(ctx context.Context, c client.Reader, storageClasses []string, node, topologyKey string, max int) (string, error) {
	users, err := NodeUsers(ctx, c, storageClasses, node, topologyKey)
	if err != nil || len(users) == 0 {
		return "", err
	}
	return fmt.Sprintf("removing the volume groups from node %s is blocked by %d volume(s) still on it: %s; the volume groups stay until they are deleted (delete them and the workloads using them), or select the node again",
		node, len(users), listSome(users, max)), nil
}

// PVNode is the node a PV's required node affinity pins it to on topologyKey ("" when none).
func PVNode(pv *corev1.PersistentVolume, topologyKey string) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == topologyKey && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}
