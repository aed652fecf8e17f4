package hostid

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The host IDs sanlock accepts.
const (
	Min = 1
	Max = 2000
)

// Defaults of Options.
const (
	// DefaultHostDead is sanlock's host_dead_seconds with its default io_timeout of 10 s: 8 x 10 s + 60 s.
	DefaultHostDead = 140 * time.Second
	// DefaultSkew is the margin for clocks that disagree between nodes.
	DefaultSkew = 30 * time.Second
)

// Label marks the host-ID Leases, so a claimer lists only them.
const Label = "lvm.topolvm.io/host-id"

// prefix of the Leases' names; the ID follows.
const prefix = "lvms-host-id-"

// Name is the Lease of an ID.
func Name(id int) string { return prefix + strconv.Itoa(id) }

// Options configure a Claimer.
type Options struct {
	// Namespace of the Leases (the agent's).
	Namespace string
	// Node is the claiming node (the holder).
	Node string
	// HostDead is how long after its holder's last renewal an ID may go to another node (default
	// DefaultHostDead: the sanlock I/O timeout in use decides it), and Skew the margin on top (default
	// DefaultSkew).
	HostDead, Skew time.Duration
	// Clock tells the time and paces Keep (default the real clock).
	Clock clock.WithTicker
	// MaxID is the highest ID handed out (default Max); tests use a small range.
	MaxID int
	// Rand picks where among the free IDs to start, so nodes starting together rarely race for the same
	// one (default a random source). Which ID a node gets carries no meaning.
	Rand *rand.Rand
}

// Claimer claims and renews one node's host ID.
type Claimer struct {
	c    client.Client
	opts Options
}

// New returns a claimer for opts.Node.
func New(c client.Client, opts Options) (*Claimer, error) {
	if opts.Namespace == "" || opts.Node == "" {
		return nil, errors.New("hostid: a namespace and a node are required")
	}
	if opts.HostDead <= 0 {
		opts.HostDead = DefaultHostDead
	}
	if opts.Skew <= 0 {
		opts.Skew = DefaultSkew
	}
	if opts.MaxID <= 0 || opts.MaxID > Max {
		opts.MaxID = Max
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Rand == nil {
		opts.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Claimer{c: c, opts: opts}, nil
}

// ErrNoneFree is returned when every ID is held by a live node.
var ErrNoneFree = errors.New("every sanlock host ID is held by a node that renewed it within the host-dead time: no node can join the lockspace until one stops")

// LostError is a renewal that found the ID held by another node: this node must stop using it (stop its
// lockspaces) and claim again.
type LostError struct {
	ID     int
	Holder string
}

func (e *LostError) Error() string {
	return fmt.Sprintf("host ID %d is held by node %q now (this node did not renew it within the host-dead time): stop its lockspaces and claim a host ID again", e.ID, e.Holder)
}

// Claim returns the node's host ID: the one it holds already (renewed), else a free one, else one whose
// holder has not renewed it for the host-dead time plus the skew margin.
func (h *Claimer) Claim(ctx context.Context) (int, error) {
	var list coordinationv1.LeaseList
	if err := h.c.List(ctx, &list, client.InNamespace(h.opts.Namespace), client.HasLabels{Label}); err != nil {
		return 0, fmt.Errorf("list the host-ID Leases in %s: %w", h.opts.Namespace, err)
	}
	held := map[int]*coordinationv1.Lease{}
	var mine []int
	for i := range list.Items {
		l := &list.Items[i]
		id, ok := parseName(l.Name)
		if !ok {
			continue
		}
		held[id] = l
		if holder(l) == h.opts.Node {
			mine = append(mine, id)
		}
	}
	// A node that restarts keeps its ID. Should it hold several (never by this code), it keeps the lowest.
	slices.Sort(mine)
	if len(mine) > 0 {
		if err := h.Renew(ctx, mine[0]); err == nil {
			return mine[0], nil
		} else if !isLost(err) {
			return 0, err
		}
	}
	var free, stale []int
	for id := Min; id <= h.opts.MaxID; id++ {
		switch l, ok := held[id]; {
		case !ok:
			free = append(free, id)
		case h.expired(l):
			stale = append(stale, id)
		}
	}
	for _, id := range h.rotate(free) {
		switch err := h.c.Create(ctx, h.lease(id)); {
		case err == nil:
			return id, nil
		case apierrors.IsAlreadyExists(err):
			continue // another node won it
		default:
			return 0, fmt.Errorf("claim host ID %d: %w", id, err)
		}
	}
	for _, id := range h.rotate(stale) {
		l := held[id].DeepCopy()
		h.take(l)
		switch err := h.c.Update(ctx, l); {
		case err == nil:
			return id, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			continue // renewed or taken meanwhile
		default:
			return 0, fmt.Errorf("take over host ID %d from node %q: %w", id, holder(held[id]), err)
		}
	}
	return 0, ErrNoneFree
}

// Renew records that the node still uses id. It returns a *LostError when another node holds it.
func (h *Claimer) Renew(ctx context.Context, id int) error {
	var l coordinationv1.Lease
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.opts.Namespace, Name: Name(id)}, &l); err != nil {
		if apierrors.IsNotFound(err) {
			return &LostError{ID: id, Holder: "(nobody: the Lease was deleted)"}
		}
		return fmt.Errorf("renew host ID %d: %w", id, err)
	}
	if holder(&l) != h.opts.Node {
		return &LostError{ID: id, Holder: holder(&l)}
	}
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(h.opts.Clock.Now()))
	l.Spec.LeaseDurationSeconds = ptr.To(int32(h.opts.HostDead / time.Second))
	if err := h.c.Update(ctx, &l); err != nil {
		return fmt.Errorf("renew host ID %d: %w", id, err)
	}
	return nil
}

// expired reports whether the Lease's holder has not renewed it for the host-dead time plus the margin.
func (h *Claimer) expired(l *coordinationv1.Lease) bool {
	return h.opts.Clock.Since(lastRenewal(l)) > h.opts.HostDead+h.opts.Skew
}

func lastRenewal(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.Time
	}
	return l.CreationTimestamp.Time
}

// Dead reports whether the node holding host-ID Lease l is dead for sanlock at now: it has not renewed the
// Lease for the host-dead time the Lease carries (its duration; DefaultHostDead without one) plus
// DefaultSkew. Its sanlock leases, and so the locks of the volumes it had active, are free for other nodes
// by then.
func Dead(l *coordinationv1.Lease, now time.Time) bool {
	hostDead := DefaultHostDead
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		hostDead = time.Duration(*d) * time.Second
	}
	return now.Sub(lastRenewal(l)) > hostDead+DefaultSkew
}

// Holder is the node holding host-ID Lease l.
func Holder(l *coordinationv1.Lease) string { return holder(l) }

// HostDead is sanlock's host-dead time for an I/O timeout in seconds (0: sanlock's default, 10 s).
func HostDead(ioTimeout int) time.Duration {
	if ioTimeout <= 0 {
		return DefaultHostDead
	}
	return time.Duration(8*ioTimeout+60) * time.Second
}

func (h *Claimer) lease(id int) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: Name(id), Namespace: h.opts.Namespace,
		Labels: map[string]string{Label: strconv.Itoa(id)}}}
	h.take(l)
	return l
}

// take makes the node the Lease's holder as of now.
func (h *Claimer) take(l *coordinationv1.Lease) {
	now := metav1.NewMicroTime(h.opts.Clock.Now())
	if l.Spec.HolderIdentity != nil {
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	}
	l.Spec.HolderIdentity = ptr.To(h.opts.Node)
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	l.Spec.LeaseDurationSeconds = ptr.To(int32(h.opts.HostDead / time.Second))
}

// rotate starts the list at a random place (keeping its order after that).
func (h *Claimer) rotate(ids []int) []int {
	if len(ids) < 2 {
		return ids
	}
	i := h.opts.Rand.IntN(len(ids))
	return append(slices.Clone(ids[i:]), ids[:i]...)
}

func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

func isLost(err error) bool {
	var lost *LostError
	return errors.As(err, &lost)
}

// parseName returns the ID of a host-ID Lease's name.
func parseName(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(rest)
	if err != nil || id < Min || id > Max || strconv.Itoa(id) != rest {
		return 0, false
	}
	return id, true
}

// Keep renews id every interval until ctx ends (nil) or another node holds it (*LostError). A failed renewal
// is tried again at the next interval: the ID stays the node's until the host-dead time passes.
func (h *Claimer) Keep(ctx context.Context, id int, interval time.Duration, failed func(error)) error {
	t := h.opts.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		err := h.Renew(ctx, id)
		switch {
		case isLost(err):
			return err
		case err != nil && failed != nil:
			failed(err)
		}
	}
}
