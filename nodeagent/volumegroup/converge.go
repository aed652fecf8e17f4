package volumegroup

import (
	"context"
	"fmt"

	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// MaxPasses bounds Converge: create the volume group, then its pools, then look once more.
const MaxPasses = 4

// Observation is what one look at the node found.
type Observation struct {
	Inventory *blockdev.Inventory
	Report    *lvm.Report
}

// Observe discovers the block devices and reads the LVM state: lsblk, wipefs (and blkid for partitions
// on hosts without udev), and one lvm fullreport.
func Observe(ctx context.Context, disc *blockdev.Discoverer, r lvm.Runner) (Observation, error) {
	inv, err := disc.Discover(ctx)
	if err != nil {
		return Observation{}, err
	}
	rep, err := r.FullReport(ctx)
	if err != nil {
		return Observation{}, err
	}
	return Observation{Inventory: inv, Report: rep}, nil
}

// Settings are the parts of a pass that do not change between passes.
type Settings struct {
	Discoverer   *blockdev.Discoverer
	Capabilities lvm.Capabilities
	Scoped       bool
	MinSize      uint64
	// PersistentVolumePaths maps device paths PersistentVolumes use directly (local volumes, VM disks) to
	// a volume's name; each pass resolves them to devices (Input.ReferencedBy).
	PersistentVolumePaths map[string]string
}

// Converge runs passes until one changes nothing (at most MaxPasses), looking at the node again after each
// change, and returns the last outcome with the observation it was made on. Events of every pass are
// kept, in order.
func (e *Engine) Converge(ctx context.Context, node *desired.Node, s Settings) (Outcome, Observation, error) {
	var events [][]Event
	for pass := 1; ; pass++ {
		obs, err := Observe(ctx, s.Discoverer, e.Runner)
		if err != nil {
			return Outcome{}, Observation{}, fmt.Errorf("look at the node: %w", err)
		}
		out := e.Reconcile(ctx, Input{Node: node, Inventory: obs.Inventory, Report: obs.Report, Capabilities: s.Capabilities,
			Scoped: s.Scoped, MinSize: s.MinSize, ReferencedBy: referencedBy(obs.Inventory, s.PersistentVolumePaths)})
		if events == nil {
			events = make([][]Event, len(out.VolumeGroups))
		}
		for i := range out.VolumeGroups {
			events[i] = append(events[i], out.VolumeGroups[i].Events...)
		}
		if !out.Changed || pass == MaxPasses || ctx.Err() != nil {
			for i := range out.VolumeGroups {
				out.VolumeGroups[i].Events = events[i]
			}
			return out, obs, nil
		}
	}
}

// referencedBy resolves PersistentVolumes' device paths (by-id links, kernel names) to kernel names.
func referencedBy(inv *blockdev.Inventory, paths map[string]string) map[string]string {
	out := map[string]string{}
	for path, pv := range paths {
		if d, ok := inv.Resolve(path); ok {
			out[d.KName] = pv
		}
	}
	return out
}
