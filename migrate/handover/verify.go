package handover

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// Verification is the comparison of the record's before snapshot with the cluster now.
type Verification struct {
	// Step the migration reached.
	Step Step
	// Before is what v1 showed at the start; After is the same view now: handed-over nodes as their
	// LVMNode status shows them, the others as the LVMCluster's node status does.
	Before, After Snapshot
	// Differences, one sentence each; none means nothing was lost or changed.
	Differences []string
}

// Verify compares the storage recorded when the migration started with the storage now.
func (m *Migrator) Verify(ctx context.Context, ns, name string) (*Verification, error) {
	cl, rec, sets, err := m.loadRecord(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("no migration record for LVMCluster %s/%s (annotation on the LVMCluster, or on its LVMNodeSets once it is removed): run lvms migrate apply first", ns, name)
	}
	v := &Verification{Step: rec.Step, Before: rec.Before}
	handed := handedOver(sets)
	var v1 map[string]lvmv1.LVMVolumeGroupNodeStatus
	if cl != nil {
		statuses, err := v1Nodes(ctx, m.Client, cl)
		if err != nil {
			return nil, err
		}
		v1 = map[string]lvmv1.LVMVolumeGroupNodeStatus{}
		for _, st := range statuses {
			v1[st.Name] = st
		}
	}
	for _, want := range rec.Before.Nodes {
		got := NodeStorage{Name: want.Name, VolumeGroups: []VolumeGroup{}}
		if slices.Contains(handed, want.Name) || cl == nil {
			var n lvmv2.LVMNode
			switch err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: want.Name}, &n); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return nil, fmt.Errorf("get LVMNode %s/%s: %w", ns, want.Name, err)
			default:
				got = v2Node(&n, want)
			}
		} else if st, ok := v1[want.Name]; ok {
			for _, vg := range st.Spec.LVMVGStatus {
				i := slices.IndexFunc(want.VolumeGroups, func(w VolumeGroup) bool { return w.Name == vg.Name })
				if i >= 0 {
					got.VolumeGroups = append(got.VolumeGroups, VolumeGroup{Name: vg.Name, Devices: sorted(vg.Devices), ThinPools: want.VolumeGroups[i].ThinPools})
				}
			}
		}
		v.After.Nodes = append(v.After.Nodes, got)
	}
	var nodes, scs, vscs []string
	for _, n := range rec.Before.Nodes {
		nodes = append(nodes, n.Name)
	}
	for _, c := range rec.Before.StorageClasses {
		scs = append(scs, c.Name)
	}
	for _, c := range rec.Before.SnapshotClasses {
		vscs = append(vscs, c.Name)
	}
	if err := observeShared(ctx, m.Client, &v.After, nodes, scs, vscs); err != nil {
		return nil, err
	}
	v.Differences = diff(v.Before, v.After)
	return v, nil
}
