package hostid_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/shared/hostid"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

func claimer(t *testing.T, ns, node string, clk *clocktesting.FakeClock, maxID int) *hostid.Claimer {
	t.Helper()
	testenv.Require(t)
	opts := hostid.Options{Namespace: ns, Node: node, MaxID: maxID}
	if clk != nil {
		opts.Clock = clk
	}
	h, err := hostid.New(env.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestClaim_ManyNodesAtOnce: 100 nodes claiming at the same time get 100 distinct IDs, each recorded with
// its node as holder; each node claiming again (a restart) gets its own ID back.
func TestClaim_ManyNodesAtOnce(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	const nodes = 100
	ids := make([]int, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			ids[i], errs[i] = claimer(t, ns, fmt.Sprintf("node-%03d", i), nil, 0).Claim(context.Background())
		})
	}
	wg.Wait()
	owner := map[int]string{}
	for i, id := range ids {
		node := fmt.Sprintf("node-%03d", i)
		if errs[i] != nil {
			t.Fatalf("%s: %v", node, errs[i])
		}
		if id < hostid.Min || id > hostid.Max {
			t.Errorf("%s got host ID %d, outside %d..%d", node, id, hostid.Min, hostid.Max)
		}
		if other, taken := owner[id]; taken {
			t.Errorf("host ID %d went to %s and %s", id, other, node)
		}
		owner[id] = node
	}
	var leases coordinationv1.LeaseList
	if err := env.Client.List(context.Background(), &leases, client.InNamespace(ns), client.HasLabels{hostid.Label}); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != nodes {
		t.Errorf("%d host-ID Leases for %d nodes", len(leases.Items), nodes)
	}
	for _, l := range leases.Items {
		var id int
		if _, err := fmt.Sscanf(l.Name, "lvms-host-id-%d", &id); err != nil || owner[id] != *l.Spec.HolderIdentity {
			t.Errorf("Lease %s is held by %q, but the claim went to %q", l.Name, *l.Spec.HolderIdentity, owner[id])
		}
	}
	for _, i := range []int{0, 42, 99} {
		node := fmt.Sprintf("node-%03d", i)
		again, err := claimer(t, ns, node, nil, 0).Claim(context.Background())
		if err != nil || again != ids[i] {
			t.Errorf("%s restarted and got host ID %d (%v), want its own %d", node, again, err, ids[i])
		}
	}
}

// TestClaim_DeadHolder: with every ID held, a node gets none; an ID goes to another node only once its
// holder has not renewed it for the host-dead time plus the margin, and never one that was renewed; the
// old holder then learns it lost the ID.
func TestClaim_DeadHolder(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	// The API server stamps nothing the claimers decide on: one fake clock stands for every node's.
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	a, b, c := claimer(t, ns, "a", clk, 2), claimer(t, ns, "b", clk, 2), claimer(t, ns, "c", clk, 2)
	idA, err := a.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idB, err := b.Claim(ctx)
	if err != nil || idB == idA {
		t.Fatalf("b got %d (%v) next to a's %d", idB, err, idA)
	}
	if _, err := c.Claim(ctx); !errors.Is(err, hostid.ErrNoneFree) {
		t.Fatalf("c with both IDs held: %v, want ErrNoneFree", err)
	}
	clk.Step(100 * time.Second)
	if err := b.Renew(ctx, idB); err != nil {
		t.Fatal(err)
	}
	clk.Step(hostid.DefaultHostDead + hostid.DefaultSkew - 100*time.Second) // a's last renewal is exactly at the limit
	if _, err := c.Claim(ctx); !errors.Is(err, hostid.ErrNoneFree) {
		t.Fatalf("c at a's host-dead limit: %v, want ErrNoneFree", err)
	}
	clk.Step(time.Second)
	idC, err := c.Claim(ctx)
	if err != nil || idC != idA {
		t.Fatalf("c after a's host-dead time got %d (%v), want a's %d (b renewed %d)", idC, err, idA, idB)
	}
	var lost *hostid.LostError
	if err := a.Renew(ctx, idA); !errors.As(err, &lost) || lost.Holder != "c" {
		t.Errorf("a renewing its lost ID: %v, want LostError naming c", err)
	}
	if err := b.Renew(ctx, idB); err != nil {
		t.Errorf("b renewing its live ID: %v", err)
	}
	if again, err := c.Claim(ctx); err != nil || again != idC {
		t.Errorf("c claiming again: %d (%v), want %d", again, err, idC)
	}
}

// TestKeep: Keep renews on every tick and returns a LostError once another node holds the ID.
func TestKeep(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	a := claimer(t, ns, "a", clk, 1)
	id, err := a.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Keep(ctx, id, 10*time.Second, nil) }()
	renewed := func() time.Time {
		var l coordinationv1.Lease
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: hostid.Name(id)}, &l); err != nil {
			t.Fatal(err)
		}
		return l.Spec.RenewTime.Time
	}
	for range 3 {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		want := clk.Now().Add(10 * time.Second)
		clk.Step(10 * time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for !renewed().Equal(want) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := renewed(); !got.Equal(want) {
			t.Fatalf("renewed at %s, want %s", got, want)
		}
	}
	// Another node takes the ID (as if a's renewals had stopped reaching the API server); a's renewal on the
	// tick the step passes may race with it.
	clk.Step(hostid.DefaultHostDead + hostid.DefaultSkew + time.Second)
	other := "b"
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var l coordinationv1.Lease
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: hostid.Name(id)}, &l); err != nil {
			return err
		}
		l.Spec.HolderIdentity = &other
		return env.Client.Update(ctx, &l)
	})
	if err != nil {
		t.Fatal(err)
	}
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(10 * time.Second)
	var lost *hostid.LostError
	if err := <-done; !errors.As(err, &lost) || lost.Holder != "b" {
		t.Errorf("Keep returned %v, want a LostError naming b", err)
	}
}
