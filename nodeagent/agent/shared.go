package agent

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/shared"
	"github.com/lvms-dev/lvms/nodeagent/status"
	"github.com/lvms-dev/lvms/nodeagent/volumegroup"
)

// sharedVGs lets the volume group engine hand shared volume groups to the shared path.
type sharedVGs struct{ n *shared.Node }

func (s sharedVGs) Step(ctx context.Context, vg *desired.VolumeGroup, inv *blockdev.Inventory) (volumegroup.Phase, string) {
	out := s.n.VolumeGroup(ctx, vg, inv)
	switch out.State {
	case shared.StateReady:
		return volumegroup.PhaseHealthy, out.Message
	case shared.StateFailed:
		return volumegroup.PhaseFailed, out.Message
	case shared.StateLeft:
		return volumegroup.PhaseDeleted, out.Message
	}
	return volumegroup.PhaseProgressing, out.Message
}

// sharedStatus is the shared path's part of the node's status; nil when the node has no shared volume group.
func (a *Agent) sharedStatus() *status.Shared {
	locking, vgs := a.shared.Report()
	if locking == nil && len(vgs) == 0 {
		return nil
	}
	out := &status.Shared{Locking: locking, VolumeGroups: map[string]status.SharedVolumeGroup{}}
	for name, o := range vgs {
		out.VolumeGroups[name] = status.SharedVolumeGroup{Joined: o.State == shared.StateReady, InitializedBy: o.InitializedBy,
			Active: a.shared.ActiveVolumes(name), Size: o.Size, Free: o.Free}
	}
	return out
}

// uncached reads Leases from the API server: the agent's cache holds only the objects it watches, and its
// RBAC allows Leases in its namespace only.
type uncached struct {
	client.Client
	r client.Reader
}

func (u uncached) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return u.r.Get(ctx, key, obj, opts...)
}

func (u uncached) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return u.r.List(ctx, list, opts...)
}
