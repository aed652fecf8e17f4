package vginit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/shared/vginit"
)

func lease(t *testing.T, ns, vg string) *coordinationv1.Lease {
	t.Helper()
	testenv.Require(t)
	var l coordinationv1.Lease
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: vginit.Name(vg)}, &l); err != nil {
		t.Fatal(err)
	}
	return &l
}

// holdLease makes node hold vg's Lease as of now, as a node in the middle of creating it does.
func holdLease(t *testing.T, ns, vg, node string, now time.Time) {
	t.Helper()
	testenv.Require(t)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vginit.Name(vg), Labels: map[string]string{vginit.Label: vg}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), RenewTime: ptr.To(metav1.NewMicroTime(now)), LeaseDurationSeconds: ptr.To[int32](60)}}
	if err := env.Client.Create(t.Context(), l); err != nil {
		t.Fatal(err)
	}
}

// TestTry: one step without waiting — not done while another node holds the Lease (naming it), done once the
// volume group is recorded.
func TestTry(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	holdLease(t, ns, "vg1", "a", t0)
	var l lun
	b := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "b", Clock: clk}
	res, done, holder, err := b.Try(t.Context(), "vg1", l.funcs())
	if err != nil || done || holder != "a" || l.creates.Load() != 0 {
		t.Fatalf("b while a holds the Lease: %+v, done %v, holder %q, %v, created %d times", res, done, holder, err, l.creates.Load())
	}
	clk.Step(61 * time.Second) // a stopped renewing
	res, done, holder, err = b.Try(t.Context(), "vg1", l.funcs())
	if err != nil || !done || holder != "" || !res.Created || res.InitializedBy != "b" || !res.At.Equal(clk.Now()) {
		t.Fatalf("b after a's Lease expired: %+v, done %v, holder %q, %v", res, done, holder, err)
	}
	c := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "c", Clock: clk}
	res, done, holder, err = c.Try(t.Context(), "vg1", l.funcs())
	if err != nil || !done || holder != "" || res.Created || res.InitializedBy != "b" || !res.At.Equal(clk.Now()) {
		t.Errorf("c after b created it: %+v, done %v, holder %q, %v", res, done, holder, err)
	}
	if _, _, _, err := (&vginit.Initializer{Client: env.Client, Namespace: ns, Node: "d", Clock: clk}).Try(t.Context(), "vg2",
		vginit.Funcs{Exists: func(context.Context) (bool, error) { return false, errors.New("lvm2 hung") }}); err == nil || !strings.Contains(err.Error(), "lvm2 hung") {
		t.Errorf("Exists failing: %v", err)
	}
}

// TestEnsure_FoundExisting: a volume group that exists on the LUN although no Lease records it (created before
// LVMS recorded it, or by hand) is recorded as found, and nobody creates it again.
func TestEnsure_FoundExisting(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	var l lun
	l.exists.Store(true)
	in := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "a"}
	res, err := in.Ensure(t.Context(), "vg1", l.funcs())
	if err != nil || res.Created || res.InitializedBy != "(found existing)" || l.creates.Load() != 0 {
		t.Fatalf("got %+v, %v, created %d times", res, err, l.creates.Load())
	}
	if got := lease(t, ns, "vg1").Annotations[vginit.InitializedByAnnotation]; got != "(found existing)" {
		t.Errorf("the Lease records %q", got)
	}
}

// TestEnsure_OwnLeaseAfterRestart: a node that restarts while it holds the Lease goes on at once; it does not
// wait for its own Lease to expire.
func TestEnsure_OwnLeaseAfterRestart(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	holdLease(t, ns, "vg1", "a", t0)
	var l lun
	in := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "a", Clock: clocktesting.NewFakeClock(t0)} // the clock never moves
	if res, err := in.Ensure(t.Context(), "vg1", l.funcs()); err != nil || !res.Created || res.InitializedBy != "a" {
		t.Fatalf("got %+v, %v", res, err)
	}
}

// TestEnsure_CanceledWhileWaiting: a node waiting for another one's creation stops when its context ends,
// with an error that says what it waited for.
func TestEnsure_CanceledWhileWaiting(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	holdLease(t, ns, "vg1", "a", t0)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	var l lun
	in := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "b", Poll: 10 * time.Millisecond, Clock: clocktesting.NewFakeClock(t0)}
	if _, err := in.Ensure(ctx, "vg1", l.funcs()); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "created by another node") {
		t.Errorf("got %v", err)
	}
}

// failing is the API server failing some calls.
type failing struct {
	client.Client
	get, create, update error
}

func (f failing) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if f.get != nil {
		return f.get
	}
	return f.Client.Get(ctx, key, o, opts...)
}

func (f failing) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	if f.create != nil {
		return f.create
	}
	return f.Client.Create(ctx, o, opts...)
}

func (f failing) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	if f.update != nil {
		return f.update
	}
	return f.Client.Update(ctx, o, opts...)
}

// TestEnsure_APIErrors: the API server failing stops the initialisation with an error naming the Lease; the
// volume group is not created.
func TestEnsure_APIErrors(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	holdLease(t, ns, "expired", "a", t0.Add(-time.Hour))
	boom := errors.New("etcd is down")
	for _, tc := range []struct {
		name, vg, want string
		c              failing
	}{
		{"get", "vg1", "get Lease", failing{get: boom}},
		{"create", "vg1", "create Lease", failing{create: boom}},
		{"take over", "expired", "take Lease", failing{update: boom}},
	} {
		var l lun
		tc.c.Client = env.Client
		in := &vginit.Initializer{Client: tc.c, Namespace: ns, Node: "b", Clock: clk}
		if _, err := in.Ensure(t.Context(), tc.vg, l.funcs()); !errors.Is(err, boom) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s failing: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if l.creates.Load() != 0 {
			t.Errorf("%s failing: the volume group was created", tc.name)
		}
	}
}

// TestTry_ExpiresAfterTheDuration: another node's Lease holds the volume group up to its duration after its
// last renewal, not a moment longer; a Lease nobody holds is free whatever its renewal time says.
func TestTry_ExpiresAfterTheDuration(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0.Add(60 * time.Second))
	holdLease(t, ns, "vg1", "a", t0)
	var l lun
	b := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "b", Clock: clk}
	if _, done, holder, err := b.Try(t.Context(), "vg1", l.funcs()); err != nil || done || holder != "a" {
		t.Fatalf("at the end of a's duration: done %v, holder %q, %v; want a to hold it still", done, holder, err)
	}
	clk.Step(time.Second)
	if _, done, _, err := b.Try(t.Context(), "vg1", l.funcs()); err != nil || !done {
		t.Fatalf("a second later: done %v, %v", done, err)
	}

	holdLease(t, ns, "vg2", "a", t0.Add(60*time.Second))
	lease := lease(t, ns, "vg2")
	lease.Spec.HolderIdentity = nil
	if err := env.Client.Update(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	if _, done, _, err := b.Try(t.Context(), "vg2", l.funcs()); err != nil || !done {
		t.Errorf("a Lease nobody holds, renewed just now: done %v, %v; want it taken", done, err)
	}
}

// TestEnsure_LongCreation: a creation that outlasts several renewals of the Lease goes on (renewing is not
// losing it); the Lease says when the node took it and that it changed hands once.
func TestEnsure_LongCreation(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	in := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "a", Duration: 30 * time.Second, Clock: clk}
	renewedAt := func() time.Time {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: vginit.Name("vg1")}, l); err != nil || l.Spec.RenewTime == nil {
			return time.Time{}
		}
		return l.Spec.RenewTime.Time
	}
	var l lun
	res, err := in.Ensure(t.Context(), "vg1", vginit.Funcs{Exists: l.funcs().Exists, Create: func(ctx context.Context) error {
		for range 3 { // three renewals, each 10 s apart
			want := clk.Now().Add(10 * time.Second)
			for !clk.HasWaiters() {
				time.Sleep(time.Millisecond)
			}
			clk.Step(10 * time.Second)
			for deadline := time.Now().Add(10 * time.Second); !renewedAt().Equal(want); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					return fmt.Errorf("the Lease was not renewed at %s", want)
				}
			}
		}
		time.Sleep(20 * time.Millisecond) // a renewal's aftermath, had it stopped the work
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("vgcreate killed: %w", context.Cause(ctx))
		}
		l.exists.Store(true)
		return nil
	}})
	if err != nil || !res.Created || res.InitializedBy != "a" {
		t.Fatalf("got %+v, %v; want a to create it", res, err)
	}
	got := lease(t, ns, "vg1")
	if got.Spec.AcquireTime == nil || !got.Spec.AcquireTime.Time.Equal(t0) || ptr.Deref(got.Spec.LeaseTransitions, 0) != 1 {
		t.Errorf("acquired %v, %d transitions; want at %s, once", got.Spec.AcquireTime, ptr.Deref(got.Spec.LeaseTransitions, 0), t0)
	}
}

// renewConflict is an API server on which the first renewal of the Lease conflicts (someone touched it).
type renewConflict struct {
	client.Client
	conflicted atomic.Bool
}

func (r *renewConflict) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	if l, ok := o.(*coordinationv1.Lease); ok && l.Spec.AcquireTime != nil && r.conflicted.CompareAndSwap(false, true) {
		return apierrors.NewConflict(coordinationv1.Resource("leases"), l.Name, errors.New("modified"))
	}
	return r.Client.Update(ctx, o, opts...)
}

// TestEnsure_LeaseLostMidway: a node that could not renew its Lease stops its creation and says it lost the
// Lease; a creation that finished anyway is the node's (the volume group exists, it made it).
func TestEnsure_LeaseLostMidway(t *testing.T) {
	testenv.Require(t)
	for _, finish := range []bool{false, true} {
		ns := env.Namespace(t)
		clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		c := &renewConflict{Client: env.Client}
		in := &vginit.Initializer{Client: c, Namespace: ns, Node: "a", Duration: 30 * time.Second, Clock: clk}
		var l lun
		res, err := in.Ensure(t.Context(), "vg1", vginit.Funcs{Exists: l.funcs().Exists, Create: func(ctx context.Context) error {
			for !clk.HasWaiters() {
				time.Sleep(time.Millisecond)
			}
			clk.Step(10 * time.Second)
			<-ctx.Done() // the renewal failed: the work is stopped
			if finish {
				l.exists.Store(true) // vgcreate had finished
				return nil
			}
			return ctx.Err()
		}})
		switch {
		case finish && (err != nil || !res.Created || res.InitializedBy != "a"):
			t.Errorf("a creation that finished: %+v, %v; want it the node's", res, err)
		case !finish && (err == nil || !strings.Contains(err.Error(), "lost Lease") || !strings.Contains(err.Error(), "modified")):
			t.Errorf("a creation stopped: %v; want it to say the Lease was lost and why", err)
		}
	}
}

// counting counts the reads of Leases.
type counting struct {
	client.Client
	gets atomic.Int32
}

func (c *counting) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Client.Get(ctx, key, o, opts...)
}

// TestEnsure_PollsAtItsInterval: a node waiting for another one's creation looks again every Poll (2 s by
// default), not in a busy loop.
func TestEnsure_PollsAtItsInterval(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	holdLease(t, ns, "vg1", "a", time.Now().Add(time.Hour))
	for _, tc := range []struct {
		poll     time.Duration
		min, max int32
	}{{0, 1, 2}, {-time.Second, 1, 2}, {50 * time.Millisecond, 3, 12}} {
		c := &counting{Client: env.Client}
		ctx, cancel := context.WithTimeout(t.Context(), 400*time.Millisecond)
		var l lun
		_, err := (&vginit.Initializer{Client: c, Namespace: ns, Node: "b", Poll: tc.poll}).Ensure(ctx, "vg1", l.funcs())
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("poll %s: %v", tc.poll, err)
		}
		if n := c.gets.Load(); n < tc.min || n > tc.max {
			t.Errorf("poll %s: the Lease was read %d times in 400 ms; want %d to %d", tc.poll, n, tc.min, tc.max)
		}
	}
}
