package vginit

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Annotations on the Lease once the volume group exists.
const (
	InitializedByAnnotation = "lvm.topolvm.io/initialized-by"
	InitializedAtAnnotation = "lvm.topolvm.io/initialized-at"
)

// Label marks the initialisation Leases.
const Label = "lvm.topolvm.io/vginit"

// Defaults of Initializer.
const (
	DefaultDuration = 60 * time.Second
	DefaultPoll     = 2 * time.Second
)

// Name is the Lease of a volume group's initialisation.
func Name(vg string) string { return "lvms-vginit-" + vg }

// Initializer creates shared volume groups, one node at a time.
type Initializer struct {
	Client    client.Client
	Namespace string
	Node      string
	// Duration is how long a holder that stopped renewing keeps the Lease (default DefaultDuration); it
	// renews every third of it. Poll is how often a waiting node looks again (default DefaultPoll).
	Duration, Poll time.Duration
	// Clock tells the time and paces renewals and waits (default the real clock).
	Clock clock.WithTicker
}

// Result says who created the volume group and when.
type Result struct {
	InitializedBy string
	At            time.Time
	// Created is true when this call created it.
	Created bool
}

// Funcs are the host side of an initialisation.
type Funcs struct {
	// Exists reports whether the volume group exists (on the shared LUN, as this node sees it).
	Exists func(ctx context.Context) (bool, error)
	// Create creates it: re-check the LUN (no signature, no foreign volume group), then vgcreate --shared.
	Create func(ctx context.Context) error
}

func (in *Initializer) defaults() (time.Duration, time.Duration, clock.WithTicker) {
	d, p, c := in.Duration, in.Poll, in.Clock
	if d <= 0 {
		d = DefaultDuration
	}
	if p <= 0 {
		p = DefaultPoll
	}
	if c == nil {
		c = clock.RealClock{}
	}
	return d, p, c
}

// Try takes one step without waiting: done when the volume group exists (found or created now); otherwise
// holder names the node that holds the Lease and is creating it.
func (in *Initializer) Try(ctx context.Context, vg string, f Funcs) (res Result, done bool, holder string, err error) {
	res, done, err = in.try(ctx, vg, f)
	if done || err != nil {
		return res, done, "", err
	}
	var l coordinationv1.Lease
	if err := in.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: Name(vg)}, &l); err == nil {
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
	}
	return res, false, holder, nil
}

// Ensure returns once volume group vg exists: recorded as done in its Lease, found by f.Exists under the
// Lease, or created by f.Create under the Lease. It waits while another live node holds the Lease.
func (in *Initializer) Ensure(ctx context.Context, vg string, f Funcs) (Result, error) {
	_, poll, clk := in.defaults()
	for {
		res, done, err := in.try(ctx, vg, f)
		if err != nil || done {
			return res, err
		}
		select {
		case <-ctx.Done():
			return Result{}, fmt.Errorf("wait for volume group %s to be created by another node: %w", vg, ctx.Err())
		case <-clk.After(poll):
		}
	}
}

// try takes one step: done when the volume group exists; not done while another node holds the Lease.
func (in *Initializer) try(ctx context.Context, vg string, f Funcs) (Result, bool, error) {
	dur, _, clk := in.defaults()
	key := client.ObjectKey{Namespace: in.Namespace, Name: Name(vg)}
	var l coordinationv1.Lease
	err := in.Client.Get(ctx, key, &l)
	switch {
	case apierrors.IsNotFound(err):
		l = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{Label: vg}}}
		in.hold(&l, clk.Now(), dur)
		if err := in.Client.Create(ctx, &l); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return Result{}, false, nil // another node was first
			}
			return Result{}, false, fmt.Errorf("create Lease %s: %w", key, err)
		}
	case err != nil:
		return Result{}, false, fmt.Errorf("get Lease %s: %w", key, err)
	case l.Annotations[InitializedByAnnotation] != "":
		return recorded(&l), true, nil
	case ptr.Deref(l.Spec.HolderIdentity, "") != in.Node && !expired(&l, clk.Now()):
		return Result{}, false, nil
	default:
		// Free, expired, or ours from before a restart: take it (a conflict means someone else did).
		in.hold(&l, clk.Now(), dur)
		if err := in.Client.Update(ctx, &l); err != nil {
			if apierrors.IsConflict(err) {
				return Result{}, false, nil
			}
			return Result{}, false, fmt.Errorf("take Lease %s: %w", key, err)
		}
	}
	res, err := in.initialize(ctx, vg, &l, f)
	return res, err == nil, err
}

// initialize runs under the held Lease, renewing it, and records the outcome.
func (in *Initializer) initialize(ctx context.Context, vg string, l *coordinationv1.Lease, f Funcs) (Result, error) {
	dur, _, clk := in.defaults()
	workCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := clk.NewTicker(dur / 3)
		defer t.Stop()
		for {
			select {
			case <-workCtx.Done():
				return
			case <-t.C():
			}
			in.hold(l, clk.Now(), dur)
			if err := in.Client.Update(workCtx, l); err != nil && workCtx.Err() == nil {
				// Whoever changed it may take over once we stop renewing: stop working now.
				stop(fmt.Errorf("lost Lease %s/%s while creating volume group %s: %w", l.Namespace, l.Name, vg, err))
				return
			}
		}
	}()
	res, err := in.work(workCtx, f)
	stop(nil)
	<-renewed
	if cause := context.Cause(workCtx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if err != nil {
		in.release(ctx, l)
		return Result{}, err
	}
	at := clk.Now().UTC()
	base := l.DeepCopy()
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	by := in.Node
	if !res.Created {
		by = "(found existing)"
		if prev := base.Annotations[InitializedByAnnotation]; prev != "" {
			by = prev
		}
	}
	l.Annotations[InitializedByAnnotation] = by
	l.Annotations[InitializedAtAnnotation] = at.Format(time.RFC3339)
	if err := in.Client.Patch(ctx, l, client.MergeFrom(base)); err != nil {
		return Result{}, fmt.Errorf("volume group %s exists, but recording it in Lease %s/%s failed: %w", vg, l.Namespace, l.Name, err)
	}
	return Result{InitializedBy: by, At: at, Created: res.Created}, nil
}

// work checks again under the Lease and creates the volume group only if it is still missing.
func (in *Initializer) work(ctx context.Context, f Funcs) (Result, error) {
	ok, err := f.Exists(ctx)
	if err != nil {
		return Result{}, err
	}
	if ok {
		return Result{}, nil
	}
	if err := f.Create(ctx); err != nil {
		return Result{}, err
	}
	return Result{Created: true}, nil
}

// release gives the Lease up after a failure, so the next node need not wait for it to expire.
func (in *Initializer) release(ctx context.Context, l *coordinationv1.Lease) {
	base := l.DeepCopy()
	l.Spec.HolderIdentity, l.Spec.RenewTime = nil, nil
	_ = in.Client.Patch(ctx, l, client.MergeFrom(base)) // if it fails, the Lease expires
}

func (in *Initializer) hold(l *coordinationv1.Lease, now time.Time, dur time.Duration) {
	t := metav1.NewMicroTime(now)
	if ptr.Deref(l.Spec.HolderIdentity, "") != in.Node {
		l.Spec.AcquireTime = &t
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	}
	l.Spec.HolderIdentity = ptr.To(in.Node)
	l.Spec.RenewTime = &t
	l.Spec.LeaseDurationSeconds = ptr.To(int32(dur / time.Second))
}

// expired reports whether nobody holds the Lease or its holder stopped renewing it for its duration.
func expired(l *coordinationv1.Lease, now time.Time) bool {
	if ptr.Deref(l.Spec.HolderIdentity, "") == "" || l.Spec.RenewTime == nil {
		return true
	}
	d := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
	return now.Sub(l.Spec.RenewTime.Time) > d
}

func recorded(l *coordinationv1.Lease) Result {
	at, _ := time.Parse(time.RFC3339, l.Annotations[InitializedAtAnnotation])
	return Result{InitializedBy: l.Annotations[InitializedByAnnotation], At: at}
}
