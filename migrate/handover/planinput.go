package handover

import (
	"context"
	"fmt"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	storagev1 "k8s.io/api/storage/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/migrate/plan"
)

// PlanFromCluster plans the migration of LVMCluster ns/name as the cluster shows it now (with its
// StorageClasses and VolumeSnapshotClasses). It returns nil, nil when the LVMCluster does not exist (a
// finished migration needs no plan).
func PlanFromCluster(ctx context.Context, c client.Client, ns, name string) (*plan.Plan, error) {
	cl, err := (&Migrator{Client: c}).getCluster(ctx, ns, name)
	if err != nil || cl == nil {
		return nil, err
	}
	ex := &plan.Existing{}
	var scs storagev1.StorageClassList
	if err := c.List(ctx, &scs); err != nil {
		return nil, fmt.Errorf("list StorageClasses: %w", err)
	}
	ex.StorageClasses = scs.Items
	var vscs snapshotv1.VolumeSnapshotClassList
	switch err := c.List(ctx, &vscs); {
	case apimeta.IsNoMatchError(err), runtime.IsNotRegisteredError(err):
	case err != nil:
		return nil, fmt.Errorf("list VolumeSnapshotClasses: %w", err)
	default:
		ex.SnapshotClasses = vscs.Items
	}
	return plan.Build(plan.Input{Cluster: cl, Existing: ex})
}
