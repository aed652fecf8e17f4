package hostid_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/shared/hostid"
)

// failing is the API server failing some calls.
type failing struct {
	client.Client
	list, create, update error
}

func (f failing) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if f.list != nil {
		return f.list
	}
	return f.Client.List(ctx, l, opts...)
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

// TestNew: a claimer needs its namespace and node; a range beyond sanlock's is cut to it.
func TestNew(t *testing.T) {
	testenv.Require(t)
	for _, o := range []hostid.Options{{Node: "a"}, {Namespace: "ns"}} {
		if _, err := hostid.New(env.Client, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	ns := env.Namespace(t)
	h, err := hostid.New(env.Client, hostid.Options{Namespace: ns, Node: "a", MaxID: hostid.Max + 5})
	if err != nil {
		t.Fatal(err)
	}
	// Every ID up to Max is held by a live node: nothing beyond Max is handed out.
	for id := hostid.Max - 1; id <= hostid.Max; id++ {
		holder := "other"
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hostid.Name(id), Labels: map[string]string{hostid.Label: "x"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
		if err := env.Client.Create(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := h.Claim(t.Context()); err != nil || id < hostid.Min || id > hostid.Max {
		t.Errorf("claimed %d (%v), want an ID in %d..%d", id, err, hostid.Min, hostid.Max)
	}
}

// junkLeases creates labelled Leases, held by holder, whose names are not exactly a host ID's (leading zeros,
// out of sanlock's range, not a number, another prefix).
func junkLeases(t *testing.T, ns, holder string) {
	t.Helper()
	testenv.Require(t)
	for _, name := range []string{"lvms-host-id-01", "lvms-host-id-0", "lvms-host-id-2001", "lvms-host-id-x", "host-id-1"} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{hostid.Label: "1"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
		if err := env.Client.Create(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClaim_IgnoresOtherLeases: a labelled Lease whose name is not exactly a host ID's holds no ID, neither for
// another node nor for the node itself; a node's own ID is found among them.
func TestClaim_IgnoresOtherLeases(t *testing.T) {
	testenv.Require(t)
	for _, holder := range []string{"other", "a"} {
		ns := env.Namespace(t)
		junkLeases(t, ns, holder)
		if id, err := claimer(t, ns, "a", nil, 1).Claim(t.Context()); err != nil || id != 1 {
			t.Errorf("junk Leases held by %s: claimed %d (%v), want 1", holder, id, err)
		}
	}
	// A node holding ID 2 restarts: it gets 2 back, however many other labelled Leases sort before it.
	ns := env.Namespace(t)
	junkLeases(t, ns, "a")
	a := claimer(t, ns, "a", nil, 3)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hostid.Name(2), Labels: map[string]string{hostid.Label: "2"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
	if err := env.Client.Create(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	if id, err := a.Claim(t.Context()); err != nil || id != 2 {
		t.Errorf("a restarting: claimed %d (%v), want its 2", id, err)
	}
}

// TestClaim_HighestID: the highest ID sanlock accepts is a host ID like any other: its holder keeps it.
func TestClaim_HighestID(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hostid.Name(hostid.Max), Labels: map[string]string{hostid.Label: "2000"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
	if err := env.Client.Create(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	if id, err := claimer(t, ns, "a", nil, 0).Claim(t.Context()); err != nil || id != hostid.Max {
		t.Errorf("claimed %d (%v), want %d, the node's own", id, err, hostid.Max)
	}
}

// hiding is an API server whose list misses one Lease (a node listed just before another created it).
type hiding struct {
	client.Client
	name string
}

func (h hiding) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if err := h.Client.List(ctx, l, opts...); err != nil {
		return err
	}
	if ll, ok := l.(*coordinationv1.LeaseList); ok {
		ll.Items = slices.DeleteFunc(ll.Items, func(x coordinationv1.Lease) bool { return x.Name == h.name })
	}
	return nil
}

// TestClaim_RaceForAFreeID: an ID another node took between the list and the claim is passed over for the
// next free one.
func TestClaim_RaceForAFreeID(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	if _, err := claimer(t, ns, "b", nil, 1).Claim(t.Context()); err != nil { // b takes ID 1
		t.Fatal(err)
	}
	// A random source that starts the rotation at ID 1, the one the list misses.
	var seed uint64
	for rand.New(rand.NewPCG(seed, seed)).IntN(2) != 0 {
		seed++
	}
	h, err := hostid.New(hiding{Client: env.Client, name: hostid.Name(1)}, hostid.Options{Namespace: ns, Node: "a", MaxID: 2, Rand: rand.New(rand.NewPCG(seed, seed))})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := h.Claim(t.Context()); err != nil || id != 2 {
		t.Errorf("claimed %d (%v), want 2", id, err)
	}
}

// TestClaim_StartsWhereTheRandomSourceSays: nodes starting together spread over the free IDs; with two free,
// a random source that starts the rotation at the second gets the second.
func TestClaim_StartsWhereTheRandomSourceSays(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	var seed uint64
	for rand.New(rand.NewPCG(seed, seed)).IntN(2) != 1 {
		seed++
	}
	h, err := hostid.New(env.Client, hostid.Options{Namespace: ns, Node: "a", MaxID: 2, Rand: rand.New(rand.NewPCG(seed, seed))})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := h.Claim(t.Context()); err != nil || id != 2 {
		t.Errorf("claimed %d (%v), want 2: the rotation starts at the second of two free IDs", id, err)
	}
}

// TestClaim_Transitions: a Lease records how often its ID changed hands: none when first claimed, one per
// take-over.
func TestClaim_Transitions(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if _, err := claimer(t, ns, "a", clk, 1).Claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	transitions := func() int32 {
		var l coordinationv1.Lease
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: hostid.Name(1)}, &l); err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(l.Spec.LeaseTransitions, 0)
	}
	if n := transitions(); n != 0 {
		t.Errorf("a new claim has %d transitions", n)
	}
	clk.Step(hostid.DefaultHostDead + hostid.DefaultSkew + time.Second)
	if _, err := claimer(t, ns, "b", clk, 1).Claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := transitions(); n != 1 {
		t.Errorf("after a take-over: %d transitions, want 1", n)
	}
}

// TestClaim_Errors: the API server failing is an error naming what was being done, not ErrNoneFree and not an
// ID.
func TestClaim_Errors(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	boom := errors.New("etcd is down")
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	for name, c := range map[string]failing{"list": {list: boom}, "create": {create: boom}} {
		c.Client = env.Client
		h, err := hostid.New(c, hostid.Options{Namespace: ns, Node: "a", MaxID: 1, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		if id, err := h.Claim(ctx); !errors.Is(err, boom) || id != 0 {
			t.Errorf("%s failing: %d, %v", name, id, err)
		}
	}
	// b holds the only ID and stops renewing it; taking it over fails.
	if _, err := claimer(t, ns, "b", clk, 1).Claim(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(hostid.DefaultHostDead + hostid.DefaultSkew + time.Second)
	h, err := hostid.New(failing{Client: env.Client, update: boom}, hostid.Options{Namespace: ns, Node: "a", MaxID: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := h.Claim(ctx); !errors.Is(err, boom) || !strings.Contains(err.Error(), `from node "b"`) || id != 0 {
		t.Errorf("take-over failing: %d, %v", id, err)
	}
	// Renewing fails the same way, and says which ID.
	if err := h.Renew(ctx, 1); err == nil || errors.Is(err, boom) {
		t.Errorf("a renewing b's ID: %v, want a LostError", err)
	}
	hb, _ := hostid.New(failing{Client: env.Client, update: boom}, hostid.Options{Namespace: ns, Node: "b", Clock: clk})
	if err := hb.Renew(ctx, 1); !errors.Is(err, boom) || !strings.Contains(err.Error(), "host ID 1") {
		t.Errorf("renewal failing: %v", err)
	}
	// b restarting while its renewal fails gets an error, not another ID next to the one it holds.
	if id, err := hb.Claim(ctx); !errors.Is(err, boom) || id != 0 {
		t.Errorf("b claiming again with renewals failing: %d, %v", id, err)
	}
}

// TestRenew_LeaseDeleted: a node whose Lease was deleted has lost its ID.
func TestRenew_LeaseDeleted(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	h := claimer(t, ns, "a", nil, 1)
	id, err := h.Claim(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hostid.Name(id)}}); err != nil {
		t.Fatal(err)
	}
	var lost *hostid.LostError
	if err := h.Renew(t.Context(), id); !errors.As(err, &lost) || lost.ID != id || !strings.Contains(err.Error(), "claim a host ID again") {
		t.Errorf("renewing a deleted Lease: %v, want a LostError", err)
	}
}

// TestKeep_FailedRenewalsAreReported: a renewal that fails (the API server is away) is reported and tried
// again at the next tick; the ID stays the node's.
func TestKeep_FailedRenewalsAreReported(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	id, err := claimer(t, ns, "a", clk, 1).Claim(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("etcd is down")
	h, err := hostid.New(failing{Client: env.Client, update: boom}, hostid.Options{Namespace: ns, Node: "a", MaxID: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	failures := make(chan error, 10)
	done := make(chan error, 1)
	go func() { done <- h.Keep(ctx, id, 10*time.Second, func(err error) { failures <- err }) }()
	for range 2 {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(10 * time.Second)
		select {
		case err := <-failures:
			if !errors.Is(err, boom) {
				t.Errorf("reported %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a failed renewal was not reported")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Keep ended with %v, want nil once its context ended", err)
	}
}

// TestDead: a host-ID Lease's holder is dead once it has not renewed for the host-dead time the Lease carries
// (sanlock's default without one) plus the skew margin, counted from its creation when never renewed.
func TestDead(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	renewed := func(d *int32) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), RenewTime: ptr.To(metav1.NewMicroTime(t0)), LeaseDurationSeconds: d}}
	}
	cases := []struct {
		name  string
		lease *coordinationv1.Lease
		limit time.Duration
	}{
		{"with its host-dead time", renewed(ptr.To[int32](220)), 220*time.Second + hostid.DefaultSkew},
		{"without a duration", renewed(nil), hostid.DefaultHostDead + hostid.DefaultSkew},
		{"with a zero duration", renewed(ptr.To[int32](0)), hostid.DefaultHostDead + hostid.DefaultSkew},
		{"never renewed", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}}, hostid.DefaultHostDead + hostid.DefaultSkew},
	}
	for _, tc := range cases {
		if hostid.Dead(tc.lease, t0.Add(tc.limit)) {
			t.Errorf("%s: dead at the limit", tc.name)
		}
		if !hostid.Dead(tc.lease, t0.Add(tc.limit+time.Second)) {
			t.Errorf("%s: alive past the limit", tc.name)
		}
	}
	if got := hostid.Holder(renewed(nil)); got != "a" {
		t.Errorf("Holder = %q", got)
	}
	if got := hostid.Holder(&coordinationv1.Lease{}); got != "" {
		t.Errorf("Holder of an unheld Lease = %q", got)
	}
}

// TestHostDead: sanlock's host-dead time is 8 I/O timeouts plus 60 s; sanlock's default I/O timeout is 10 s.
func TestHostDead(t *testing.T) {
	for io, want := range map[int]time.Duration{0: 140 * time.Second, -3: 140 * time.Second, 10: 140 * time.Second, 20: 220 * time.Second, 1: 68 * time.Second} {
		if got := hostid.HostDead(io); got != want {
			t.Errorf("HostDead(%d) = %s, want %s", io, got, want)
		}
	}
}
