package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/status"
	"github.com/lvms-dev/lvms/nodeagent/volumegroup"
)

// pass is what one reconcile observed and did.
type pass struct {
	// node is the desired state the engine worked on (in ExternalConfiguration mode without the v1
	// volume groups, which the host's lvmd.yaml replaces).
	node     *desired.Node
	outcome  volumegroup.Outcome
	obs      volumegroup.Observation
	caps     lvm.Capabilities
	lvmd     status.LVMD
	external *status.External
}

type resultView struct{ volumegroup.Result }

func (r resultView) deleted() bool { return r.Phase == volumegroup.PhaseDeleted }

// result returns the outcome of a desired volume group from a source.
func (p *pass) result(name string, src desired.Source) (resultView, bool) {
	for i, vg := range p.node.VolumeGroups {
		if vg.Name == name && vg.Source == src && i < len(p.outcome.VolumeGroups) {
			return resultView{p.outcome.VolumeGroups[i]}, true
		}
	}
	return resultView{}, false
}

func (p *pass) progressing() bool {
	for _, r := range p.outcome.VolumeGroups {
		if r.Phase == volumegroup.PhaseProgressing {
			return true
		}
	}
	return false
}

// engineNode is the part of the desired state the engine manages.
func engineNode(d *desired.Node) *desired.Node {
	if !d.External {
		return d
	}
	out := *d
	out.VolumeGroups, out.DeviceClasses = nil, nil
	for _, vg := range d.VolumeGroups {
		if vg.Source == desired.SourceLVMNode {
			out.VolumeGroups = append(out.VolumeGroups, vg)
		}
	}
	for _, dc := range d.DeviceClasses {
		if dc.Source == desired.SourceLVMNode {
			out.DeviceClasses = append(out.DeviceClasses, dc)
		}
	}
	return &out
}

func neededTargets(n *desired.Node) []string {
	var out []string
	for _, dc := range n.DeviceClasses {
		out = append(out, dc.Needs...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// observeAndReconcile looks at the node, runs the engine until it converges, and handles lvmd.yaml.
func (a *Agent) observeAndReconcile(ctx context.Context, in *inputs) (*pass, error) {
	p := &pass{node: engineNode(in.desired)}
	p.caps = a.capabilities(ctx, neededTargets(p.node))
	scoped := a.opts.Runner.DevicesFile != ""
	if scoped {
		if err := a.ensureDevicesFile(ctx); err != nil {
			return nil, err
		}
	}
	if len(p.node.VolumeGroups) > 0 {
		pvPaths, err := a.persistentVolumePaths(ctx)
		if err != nil {
			return nil, err // taking a device a PersistentVolume uses is worse than waiting
		}
		eng := &volumegroup.Engine{Runner: a.opts.Runner, Wipes: &apiWipes{a: a, in: in}, Clock: a.opts.Clock, Shared: sharedVGs{a.shared}}
		out, obs, err := eng.Converge(ctx, p.node, volumegroup.Settings{Discoverer: a.disc, Capabilities: p.caps,
			Scoped: scoped, MinSize: a.opts.MinDeviceSize, PersistentVolumePaths: pvPaths})
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			// The node could not be read (a command failed or printed something unreadable): say so in
			// status for every volume group, and look again soon.
			p.outcome, p.obs = unobserved(p.node, err), volumegroup.Observation{Report: &lvm.Report{}}
		} else {
			p.outcome, p.obs = out, obs
		}
	} else {
		// Nothing to manage: only the LVM state matters (for an external lvmd.yaml).
		if in.desired.External {
			rep, err := a.opts.Runner.FullReport(ctx)
			if err != nil {
				return nil, fmt.Errorf("look at the node: %w", err)
			}
			p.obs.Report = rep
		} else {
			p.obs.Report = &lvm.Report{}
		}
	}
	if in.desired.External {
		p.lvmd, p.external = a.checkExternalLVMD(p.obs.Report)
	} else {
		p.lvmd = a.writeLVMD(p)
	}
	return p, nil
}

// unobserved is the outcome of a pass that could not look at the node.
func unobserved(n *desired.Node, err error) volumegroup.Outcome {
	var out volumegroup.Outcome
	for _, vg := range n.VolumeGroups {
		out.VolumeGroups = append(out.VolumeGroups, volumegroup.Result{Name: vg.Name, Phase: volumegroup.PhaseProgressing,
			Message: fmt.Sprintf("the node agent could not read the node's devices and LVM state, so volume group %s is unknown: %v", vg.Name, err),
			Wiped:   map[string]time.Time{}})
	}
	return out
}
