package shared

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/shared/hostid"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockd"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockspace"
	"github.com/lvms-dev/lvms/nodeagent/shared/vginit"
)

// State of a shared volume group on this node after a pass.
type State string

// States.
const (
	// StateReady: the node is in the volume group's lockspace.
	StateReady State = "Ready"
	// StateProgressing: a step is under way or waits (host ID, lock managers, another node creating it,
	// lockstart being retried); the message says which.
	StateProgressing State = "Progressing"
	// StateFailed: the node cannot go on without someone acting (a LUN missing or not blank).
	StateFailed State = "Failed"
	// StateLeft: the volume group is being deleted and this node left its lockspace; the volume group
	// stays on the LUN.
	StateLeft State = "Left"
)

// Outcome is a shared volume group's state on this node, for status.
type Outcome struct {
	State   State
	Message string
	// HostID the node holds (0 before it has one); LockManagers is the lock managers' state.
	HostID       int
	LockManagers lockd.Status
	// InitializedBy is the node that created the volume group ("" until it exists).
	InitializedBy string
	// Size and Free of the volume group once joined (the agent's own lvm report skips shared volume groups:
	// only commands with the lock managers' configuration read them).
	Size, Free uint64
}

// Node is one node's part of the shared volume groups: it claims the node's host ID, has the lock managers
// run, creates a volume group behind its Lease and joins its lockspace, one step per pass so a pass never
// blocks on another node.
type Node struct {
	Client    client.Client
	Namespace string
	Name      string
	Runner    lvm.Runner
	Log       logr.Logger
	// Lockd tunes the lock-manager supervisor (Runner and HostID are set here).
	Lockd lockd.Options
	// Changed is called when what Report or ActiveVolumes says changed outside a pass (a volume staged or
	// unstaged), so the agent publishes its status.
	Changed func()

	mu      sync.Mutex
	last    map[string]Outcome // by volume group, for status
	life    context.Context
	hostID  int
	lost    error
	sup     *lockd.Supervisor
	devices map[string]bool                            // LUNs added to the devices file
	active  map[string]map[string]lockspace.Activation // by volume group and LV, once read
}

// ErrNotStarted is returned by a pass before Run started.
var ErrNotStarted = errors.New("the shared volume group machinery has not started yet")

// Run keeps the node's background work (host-ID renewal, lock managers) alive until ctx ends, then stops
// the lock managers the agent started.
func (n *Node) Run(ctx context.Context) error {
	n.mu.Lock()
	n.life = ctx
	n.mu.Unlock()
	<-ctx.Done()
	return nil
}

// VolumeGroup takes the next step for shared volume group vg: host ID, lock managers, the LUN in the
// devices file, creation behind the Lease, lockstart.
func (n *Node) VolumeGroup(ctx context.Context, vg *desired.VolumeGroup, inv *blockdev.Inventory) Outcome {
	out := n.step(ctx, vg, inv)
	n.mu.Lock()
	if n.last == nil {
		n.last = map[string]Outcome{}
	}
	n.last[vg.Name] = out
	n.mu.Unlock()
	return out
}

// Report is what status shows: the lock managers (nil before any shared volume group needed them) and each
// shared volume group's last outcome.
func (n *Node) Report() (*lvmv2.SharedLockingStatus, map[string]Outcome) {
	n.mu.Lock()
	defer n.mu.Unlock()
	vgs := maps.Clone(n.last)
	if n.sup == nil && n.hostID == 0 {
		return nil, vgs
	}
	ls := &lvmv2.SharedLockingStatus{Mode: string(lockd.ModeNotRunning), HostID: int32(n.hostID), Fencing: lockd.FencingOff}
	if n.sup != nil {
		st := n.sup.Status()
		ls.Mode, ls.Watchdog, ls.Fencing = string(st.Mode), st.Watchdog, st.Fencing
		ls.Message = firstNonEmpty(st.Sanlock.LastError, st.Lvmlockd.LastError, st.Wdmd.LastError)
	}
	if n.lost != nil {
		ls.Message = n.lost.Error()
	}
	return ls, vgs
}

func (n *Node) step(ctx context.Context, vg *desired.VolumeGroup, inv *blockdev.Inventory) Outcome {
	if vg.Deleting {
		return n.leave(ctx, vg)
	}
	out := Outcome{State: StateProgressing}
	id, err := n.ensureHostID(ctx)
	out.HostID = id
	if err != nil {
		out.Message = err.Error()
		return out
	}
	sup, err := n.ensureLockManagers(id)
	if err != nil {
		out.Message = err.Error()
		return out
	}
	out.LockManagers = sup.Status()
	if st := out.LockManagers; !st.Sanlock.Running || !st.Lvmlockd.Running {
		out.Message = "waiting for sanlock and lvmlockd (" + string(st.Mode) + "): " + firstNonEmpty(st.Lvmlockd.LastError, st.Sanlock.LastError, "starting")
		return out
	}
	devs, err := n.luns(ctx, vg, inv)
	if err != nil {
		out.State, out.Message = StateFailed, err.Error()
		return out
	}
	l := lockspace.LVM{Runner: n.Runner, HostID: id}
	in := &vginit.Initializer{Client: n.Client, Namespace: n.Namespace, Node: n.Name}
	res, done, holder, err := in.Try(ctx, vg.Name, vginit.Funcs{
		Exists: func(ctx context.Context) (bool, error) { return l.Exists(ctx, vg.Name) },
		Create: func(ctx context.Context) error { return l.Create(ctx, vg.Name, devs, 0) },
	})
	var blank *lockspace.BlankError
	switch {
	case errors.As(err, &blank):
		out.State, out.Message = StateFailed, err.Error()
		return out
	case err != nil:
		out.Message = err.Error()
		return out
	case !done:
		out.Message = fmt.Sprintf("shared volume group %s is being created by node %s", vg.Name, firstNonEmpty(holder, "(another node)"))
		return out
	}
	out.InitializedBy = res.InitializedBy
	joined, err := l.Started(ctx)
	if err != nil {
		out.Message = err.Error()
		return out
	}
	if !slices.Contains(joined, vg.Name) {
		if err := l.Start(ctx, vg.Name); err != nil {
			out.Message = err.Error() + " (the first attempts fail while sanlock acquires the host ID; retrying)"
			return out
		}
		// lvm2 takes a lockspace lvmlockd still lists after a failed start for started: only sanlock says.
		if joined, err = l.Started(ctx); err != nil {
			out.Message = err.Error()
			return out
		}
		if !slices.Contains(joined, vg.Name) {
			out.Message = fmt.Sprintf("joining the lockspace of shared volume group %s: lvm2 started it, sanlock does not hold it yet (a previous start failed or is under way); retrying", vg.Name)
			return out
		}
	}
	if out.Size, out.Free, err = l.Space(ctx, vg.Name); err != nil {
		out.Message = err.Error()
		return out
	}
	out.State = StateReady
	out.Message = fmt.Sprintf("in the lockspace of shared volume group %s with host ID %d (lock managers: %s; %s)", vg.Name, id, out.LockManagers.Mode, out.LockManagers.Fencing)
	return out
}

// leave takes this node out of the lockspace of a shared volume group being deleted. LVMS never removes a
// shared volume group: every node's volumes live on it, and only an admin who checked them all can.
func (n *Node) leave(ctx context.Context, vg *desired.VolumeGroup) Outcome {
	kept := fmt.Sprintf("shared volume group %s stays on its LUN: LVMS does not remove shared volume groups; once no node uses it, remove it from one node "+
		"(the first shared volume group carries lvm2's global lock: if other shared volume groups remain, move it first with lvmlockctl --gl-disable %s, then lvmlockctl --gl-enable <another>; "+
		"then vgremove --config 'global{use_lvmlockd=1}' %s, with the lock managers running)", vg.Name, vg.Name, vg.Name)
	n.mu.Lock()
	id, sup := n.hostID, n.sup
	n.mu.Unlock()
	if id == 0 || sup == nil || !sup.Status().Lvmlockd.Running {
		return Outcome{State: StateLeft, HostID: id, Message: "not in its lockspace; " + kept}
	}
	l := lockspace.LVM{Runner: n.Runner, HostID: id}
	joined, err := l.Started(ctx)
	if err != nil {
		return Outcome{State: StateProgressing, HostID: id, Message: err.Error()}
	}
	if slices.Contains(joined, vg.Name) {
		if err := n.handOverGlobalLock(ctx, l, vg.Name, joined); err != nil {
			return Outcome{State: StateProgressing, HostID: id, Message: err.Error()}
		}
		if err := l.Stop(ctx, vg.Name); err != nil {
			return Outcome{State: StateProgressing, HostID: id, Message: err.Error() + " (a volume of it may still be active on this node: stop what uses it)"}
		}
	}
	return Outcome{State: StateLeft, HostID: id, Message: "left its lockspace; " + kept}
}

// handOverGlobalLock moves lvm2's global lock off a shared volume group this node leaves when it carries it
// and another shared volume group stays joined here: the others keep a global lock once nobody is in this
// one's lockspace (and when an admin removes it).
func (n *Node) handOverGlobalLock(ctx context.Context, l lockspace.LVM, vg string, joined []string) error {
	gl, err := l.GlobalLock(ctx)
	if err != nil || gl != vg {
		return err
	}
	for _, other := range slices.Sorted(slices.Values(joined)) {
		if other == vg {
			continue
		}
		if err := l.MoveGlobalLock(ctx, vg, other); err != nil {
			return err
		}
		n.Log.Info("Moved the global lock before leaving the shared volume group", "from", vg, "to", other)
		return nil
	}
	return nil // the last shared volume group here: the global lock stays with it
}

// ensureHostID claims the node's host ID once and keeps renewing it.
func (n *Node) ensureHostID(ctx context.Context) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.life == nil {
		return 0, ErrNotStarted
	}
	if n.lost != nil {
		return n.hostID, fmt.Errorf("%w; restart the node agent after leaving every shared volume group's lockspace", n.lost)
	}
	if n.hostID != 0 {
		return n.hostID, nil
	}
	hostDead := hostid.HostDead(n.Lockd.SanlockIOTimeout)
	claimer, err := hostid.New(n.Client, hostid.Options{Namespace: n.Namespace, Node: n.Name, HostDead: hostDead})
	if err != nil {
		return 0, err
	}
	id, err := claimer.Claim(ctx)
	if err != nil {
		return 0, fmt.Errorf("claim a sanlock host ID: %w", err)
	}
	n.hostID = id
	life := n.life
	go func() {
		err := claimer.Keep(life, id, hostDead/4, func(err error) { n.Log.Error(err, "Renewing the host ID failed; retrying", "hostID", id) })
		if err != nil {
			n.mu.Lock()
			n.lost = err
			n.mu.Unlock()
			n.Log.Error(err, "The host ID went to another node", "hostID", id)
		}
	}()
	return id, nil
}

// ensureLockManagers starts the supervisor once the host ID is known.
func (n *Node) ensureLockManagers(id int) (*lockd.Supervisor, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sup != nil {
		return n.sup, nil
	}
	opts := n.Lockd
	opts.Runner, opts.HostID, opts.Log = n.Runner, id, n.Log
	sup, err := lockd.New(opts)
	if err != nil {
		return nil, err
	}
	n.sup = sup
	life := n.life
	go func() {
		if err := sup.Run(life); err != nil {
			n.Log.Error(err, "The lock managers could not be supervised")
		}
	}()
	return sup, nil
}

// luns resolves the volume group's LUNs on this node and puts them into the agent's devices file.
func (n *Node) luns(ctx context.Context, vg *desired.VolumeGroup, inv *blockdev.Inventory) ([]*blockdev.Device, error) {
	if vg.Selector == nil || !vg.Selector.Explicit() {
		return nil, fmt.Errorf("shared volume group %s must name its LUNs by path (the same on every node)", vg.Name)
	}
	var devs []*blockdev.Device
	var missing []string
	for _, p := range vg.Selector.NamedPaths() {
		d, ok := inv.Resolve(p.Path)
		if !ok {
			missing = append(missing, p.Path)
			continue
		}
		devs = append(devs, d)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("LUN %s of shared volume group %s is not visible on this node: check its SAN zoning and multipath, then LVMS goes on", strings.Join(missing, ", "), vg.Name)
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("shared volume group %s names no LUN", vg.Name)
	}
	for _, d := range devs {
		n.mu.Lock()
		added := n.devices[d.KName]
		n.mu.Unlock()
		if added {
			continue
		}
		if err := lockspace.AddDevice(ctx, n.Runner, d.KName); err != nil {
			return nil, err
		}
		n.mu.Lock()
		if n.devices == nil {
			n.devices = map[string]bool{}
		}
		n.devices[d.KName] = true
		n.mu.Unlock()
	}
	return devs, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
