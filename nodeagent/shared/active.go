package shared

import (
	"context"
	"fmt"
	"maps"
	"slices"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockspace"
)

// NotJoinedError is a shared volume group this node is not (yet) in the lockspace of: nothing of it can be
// created, activated or removed here.
type NotJoinedError struct {
	VG, Node, Why string
}

func (e *NotJoinedError) Error() string {
	msg := fmt.Sprintf("node %s is not in the lockspace of shared volume group %s", e.Node, e.VG)
	if e.Why != "" {
		msg += ": " + e.Why
	}
	return msg
}

// Lockspace returns the lvm2 commands of this node for shared volume group vg, or a *NotJoinedError when
// the node has not joined its lockspace.
func (n *Node) Lockspace(vg string) (lockspace.LVM, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out, ok := n.last[vg]
	switch {
	case !ok:
		return lockspace.LVM{}, &NotJoinedError{VG: vg, Node: n.Name, Why: "it is not a shared volume group of this node's LVMNode"}
	case out.State != StateReady || n.hostID == 0:
		return lockspace.LVM{}, &NotJoinedError{VG: vg, Node: n.Name, Why: out.Message}
	}
	return lockspace.LVM{Runner: n.Runner, HostID: n.hostID}, nil
}

// Activate activates LV lv of shared volume group vg on this node, exclusively (ReadWriteOnce) or shared
// (ReadWriteMany block), and records it for status. Activating again the same way is a no-op; another way
// is refused (unstage first). Another node's conflicting lock is a *lockspace.LockedError.
func (n *Node) Activate(ctx context.Context, vg, lv string, how lockspace.Activation) error {
	l, cur, err := n.current(ctx, vg, lv)
	if err != nil {
		return err
	}
	switch {
	case cur == how:
		return nil
	case cur != "":
		return fmt.Errorf("%s/%s is active on this node as %s already: unstage it before staging it as %s", vg, lv, modeOf(cur), modeOf(how))
	}
	if err := l.Activate(ctx, vg, lv, how); err != nil {
		return err
	}
	n.setActive(vg, lv, how)
	return nil
}

// Deactivate deactivates LV lv of vg on this node (releasing its lock) and drops it from status. An LV
// that is not active here is deactivated already.
func (n *Node) Deactivate(ctx context.Context, vg, lv string) error {
	l, cur, err := n.current(ctx, vg, lv)
	if err != nil {
		return err
	}
	if cur == "" {
		return nil
	}
	if err := l.Deactivate(ctx, vg, lv); err != nil {
		return err
	}
	n.setActive(vg, lv, "")
	return nil
}

// current returns this node's lvm2 commands for vg and how LV lv is active here ("" when it is not).
func (n *Node) current(ctx context.Context, vg, lv string) (lockspace.LVM, lockspace.Activation, error) {
	l, err := n.Lockspace(vg)
	if err != nil {
		return l, "", err
	}
	if err := n.loadActive(ctx, l, vg); err != nil {
		return l, "", err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return l, n.active[vg][lv], nil
}

// ActiveVolumes are the LVs of vg active on this node, by name, for status (nil before the agent read them).
func (n *Node) ActiveVolumes(vg string) []lvmv2.SharedActiveVolume {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []lvmv2.SharedActiveVolume
	for _, name := range slices.Sorted(maps.Keys(n.active[vg])) {
		out = append(out, lvmv2.SharedActiveVolume{Name: name, Mode: modeOf(n.active[vg][name])})
	}
	return out
}

// loadActive reads once per volume group which of its LVs are active on this node, so that a restarted
// agent reports what it activated before (lvs sees this node's activations, not other nodes').
func (n *Node) loadActive(ctx context.Context, l lockspace.LVM, vg string) error {
	n.mu.Lock()
	_, loaded := n.active[vg]
	n.mu.Unlock()
	if loaded {
		return nil
	}
	lvs, err := l.LVs(ctx, vg)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.active == nil {
		n.active = map[string]map[string]lockspace.Activation{}
	}
	if _, loaded := n.active[vg]; loaded {
		return nil
	}
	m := map[string]lockspace.Activation{}
	for name, lv := range lvs {
		if lv.Active != "" {
			m[name] = lv.Active
		}
	}
	n.active[vg] = m
	return nil
}

func (n *Node) setActive(vg, lv string, how lockspace.Activation) {
	n.mu.Lock()
	if how == "" {
		delete(n.active[vg], lv)
	} else {
		n.active[vg][lv] = how
	}
	changed := n.Changed
	n.mu.Unlock()
	if changed != nil {
		changed()
	}
}

func modeOf(a lockspace.Activation) lvmv2.SharedActivationMode {
	if a == lockspace.Shared {
		return lvmv2.ActivationShared
	}
	return lvmv2.ActivationExclusive
}

// ActiveIn returns the shared volume group in which LV lv is active on this node, "" when it is active in
// none. It reads every joined volume group's activations first, so an LV activated before the agent
// restarted is found too.
func (n *Node) ActiveIn(ctx context.Context, lv string) (string, error) {
	n.mu.Lock()
	var joined []string
	for vg, out := range n.last {
		if out.State == StateReady {
			joined = append(joined, vg)
		}
	}
	n.mu.Unlock()
	slices.Sort(joined)
	for _, vg := range joined {
		l, err := n.Lockspace(vg)
		if err != nil {
			continue
		}
		if err := n.loadActive(ctx, l, vg); err != nil {
			return "", err
		}
		n.mu.Lock()
		_, ok := n.active[vg][lv]
		n.mu.Unlock()
		if ok {
			return vg, nil
		}
	}
	return "", nil
}
