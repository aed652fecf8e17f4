package live_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/live"
)

// reviewer is a TokenReview that accepts the tokens in valid and counts its calls.
type reviewer struct {
	valid map[string]bool
	calls map[string]int
}

func (r *reviewer) review(_ context.Context, token string) error {
	r.calls[token]++
	if !r.valid[token] {
		return errors.New("token not authenticated")
	}
	return nil
}

// A token is reviewed before its first use and again after RecheckEvery: a revoked token stops reading
// (Unauthorized) and its informers go. The pool keeps at most MaxSources callers, the least recently used
// going first.
func TestPool_ReviewsTokensAndStaysBounded(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2032, 3, 4, 5, 6, 7, 0, time.UTC))
	rv := &reviewer{valid: map[string]bool{"alice": true, "bob": true, "carol": true}, calls: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := live.NewPool(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, live.Options{Clock: clk, TokenReview: rv.review,
		RecheckEvery: 5 * time.Minute, MaxSources: 2}, time.Hour)
	for _, tok := range []string{"alice", "alice", "alice"} {
		if _, err := pool.For(ctx, tok); err != nil {
			t.Fatalf("For(%s): %v", tok, err)
		}
	}
	if rv.calls["alice"] != 1 {
		t.Errorf("alice reviewed %d times within the recheck period, want once", rv.calls["alice"])
	}
	if _, err := pool.For(ctx, "mallory"); !isUnauthorized(err) || pool.Len() != 1 {
		t.Errorf("unknown token: %v, %d sources; want Unauthorized and no informers for it", err, pool.Len())
	}

	rv.valid["alice"] = false // revoked
	clk.SetTime(clk.Now().Add(4 * time.Minute))
	if _, err := pool.For(ctx, "alice"); err != nil {
		t.Errorf("before the recheck a revoked token still reads (cached): %v", err)
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	if _, err := pool.For(ctx, "alice"); !isUnauthorized(err) {
		t.Errorf("after the recheck: %v, want Unauthorized", err)
	}
	if rv.calls["alice"] != 2 || pool.Len() != 0 {
		t.Errorf("alice reviewed %d times, %d sources left; want 2 reviews and her source gone", rv.calls["alice"], pool.Len())
	}

	// Bounded: bob, carol, then bob again and a third caller: carol (least recently used) goes.
	for _, tok := range []string{"bob", "carol"} {
		clk.SetTime(clk.Now().Add(time.Second))
		if _, err := pool.For(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	rv.valid["dave"] = true
	clk.SetTime(clk.Now().Add(time.Second))
	_, _ = pool.For(ctx, "bob")
	clk.SetTime(clk.Now().Add(time.Second))
	_, _ = pool.For(ctx, "dave")
	if pool.Len() != 2 {
		t.Errorf("%d sources, want at most MaxSources=2", pool.Len())
	}
	before := rv.calls["bob"]
	_, _ = pool.For(ctx, "bob")
	if rv.calls["bob"] != before {
		t.Error("bob's source was evicted although carol's was older")
	}
	before = rv.calls["carol"]
	_, _ = pool.For(ctx, "carol")
	if rv.calls["carol"] != before+1 {
		t.Error("carol's source was kept although she was the least recently used")
	}
}

func isUnauthorized(err error) bool {
	var ae *console.AccessError
	return errors.As(err, &ae) && ae.Unauthorized
}

// A caller's source idle longer than the idle TTL goes when another request comes; the base credentials'
// source and the caller asking stay.
func TestPool_IdleSourcesGo(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2032, 3, 4, 5, 6, 7, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := live.NewPool(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, live.Options{Clock: clk}, time.Minute)
	pool.Base()
	for _, tok := range []string{"alice", "bob"} {
		if _, err := pool.For(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(clk.Now().Add(30 * time.Second))
	_, _ = pool.For(ctx, "bob") // bob used again; alice idle
	if pool.Len() != 3 {
		t.Errorf("%d sources within the idle TTL, want base, alice and bob", pool.Len())
	}
	clk.SetTime(clk.Now().Add(45 * time.Second)) // alice idle 75 s, bob 45 s, base 75 s
	_, _ = pool.For(ctx, "carol")
	if pool.Len() != 3 {
		t.Errorf("%d sources, want base, bob and carol: alice idle past the TTL goes, the base source never", pool.Len())
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	_, _ = pool.For(ctx, "carol")
	if pool.Len() != 2 {
		t.Errorf("%d sources, want base and carol, the caller asking", pool.Len())
	}
}

// The edges: a source idle exactly the TTL stays, a token is reviewed again exactly RecheckEvery after its
// last review, and the base credentials' source is never evicted to stay within MaxSources.
func TestPool_Edges(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2032, 3, 4, 5, 6, 7, 0, time.UTC))
	rv := &reviewer{valid: map[string]bool{"alice": true, "bob": true, "carol": true}, calls: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	newPool := func(maxSources int) *live.Pool {
		return live.NewPool(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, live.Options{Clock: clk, TokenReview: rv.review,
			RecheckEvery: 5 * time.Minute, MaxSources: maxSources}, 5*time.Minute)
	}

	pool := newPool(10)
	if _, err := pool.For(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(5 * time.Minute))
	if _, err := pool.For(ctx, "bob"); err != nil || pool.Len() != 2 {
		t.Errorf("%d sources after alice was idle exactly the TTL (%v), want alice kept", pool.Len(), err)
	}
	if _, err := pool.For(ctx, "bob"); err != nil || rv.calls["bob"] != 1 {
		t.Errorf("bob reviewed %d times at once, want 1 (%v)", rv.calls["bob"], err)
	}
	clk.SetTime(clk.Now().Add(5 * time.Minute))
	if _, err := pool.For(ctx, "bob"); err != nil || rv.calls["bob"] != 2 {
		t.Errorf("bob reviewed %d times exactly RecheckEvery later, want 2 (%v)", rv.calls["bob"], err)
	}

	pool = newPool(2)
	base := pool.Base()
	for _, tok := range []string{"alice", "bob", "carol"} {
		clk.SetTime(clk.Now().Add(time.Second))
		if _, err := pool.For(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if pool.Len() != 2 || pool.Base() != base {
		t.Errorf("%d sources; the base source (least recently used) was evicted to make room for callers", pool.Len())
	}
}

// apiDown is what the API server's unavailability looks like to a TokenReview: the call's error, wrapped.
var apiDown = fmt.Errorf("review the token: %w", apierrors.NewServiceUnavailable("etcdserver: leader changed"))

// A refused token is refused again from memory for RefusedFor, without a review; after it, it is reviewed
// again. A review that could not be made (the API server unavailable) is not remembered as a refusal.
func TestPool_RemembersRefusalsBriefly(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2032, 3, 4, 5, 6, 7, 0, time.UTC))
	rv := &reviewer{valid: map[string]bool{"alice": true}, calls: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := live.NewPool(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, live.Options{Clock: clk, TokenReview: rv.review,
		RefusedFor: 20 * time.Second}, time.Hour)
	for range 50 {
		if _, err := pool.For(ctx, "bogus"); !isUnauthorized(err) {
			t.Fatalf("bogus token: %v, want Unauthorized", err)
		}
	}
	clk.SetTime(clk.Now().Add(19 * time.Second))
	if _, err := pool.For(ctx, "bogus"); !isUnauthorized(err) || rv.calls["bogus"] != 1 {
		t.Errorf("51 requests within RefusedFor: %v, %d reviews; want Unauthorized from one review", err, rv.calls["bogus"])
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if _, err := pool.For(ctx, "bogus"); !isUnauthorized(err) || rv.calls["bogus"] != 2 {
		t.Errorf("after RefusedFor: %v, %d reviews; want Unauthorized from a second review", err, rv.calls["bogus"])
	}
	if _, err := pool.For(ctx, "alice"); err != nil || rv.calls["alice"] != 1 {
		t.Errorf("a valid token beside the refused one: %v, %d reviews", err, rv.calls["alice"])
	}

	down := func(context.Context, string) error { return apiDown }
	rv.calls = map[string]int{}
	calls := 0
	pool = live.NewPool(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, live.Options{Clock: clk, TokenReview: func(ctx context.Context, token string) error {
		calls++
		if calls <= 2 {
			return down(ctx, token)
		}
		return rv.review(ctx, token)
	}}, time.Hour)
	for i := range 2 {
		_, err := pool.For(ctx, "alice")
		var ae *console.AccessError
		if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), "could not be reviewed") {
			t.Errorf("review %d with the API server down: %v, want an error saying the token could not be reviewed, not an access error", i+1, err)
		}
	}
	if _, err := pool.For(ctx, "alice"); err != nil || calls != 3 {
		t.Errorf("with the API server back: %v after %d reviews; want alice accepted by a third review, the failures not remembered", err, calls)
	}
}

// A client's reviews of tokens the pool has no source for are limited: NewTokenBurst at once, then
// NewTokenRate a second; over it For refuses without a review, saying when to retry. Known tokens (their
// rechecks included), tokens refused from memory and other clients are not limited; a call without a
// client is not either.
func TestPool_LimitsNewTokensPerClient(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2032, 3, 4, 5, 6, 7, 0, time.UTC))
	rv := &reviewer{valid: map[string]bool{"alice": true}, calls: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := live.NewPool(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, live.Options{Clock: clk, TokenReview: rv.review,
		RecheckEvery: 5 * time.Minute, NewTokenRate: 2, NewTokenBurst: 10}, time.Hour)
	attacker, other := live.WithClient(ctx, "10.0.0.1"), live.WithClient(ctx, "10.0.0.2")
	if _, err := pool.For(attacker, "alice"); err != nil {
		t.Fatal(err)
	}
	reviews := func() int {
		n := 0
		for _, c := range rv.calls {
			n += c
		}
		return n
	}
	flood := func(n int) (refused int, limited *live.TooManyNewTokensError) {
		for range n {
			_, err := pool.For(attacker, rand.Text())
			switch {
			case isUnauthorized(err):
				refused++
			case errors.As(err, &limited):
			default:
				t.Fatalf("random token: %v, want Unauthorized or TooManyNewTokensError", err)
			}
		}
		return refused, limited
	}
	refused, limited := flood(100)
	if refused != 9 || reviews() != 10 || limited == nil {
		t.Fatalf("100 random tokens after alice's: %d refused by %d reviews, limited: %v; want 9 (the burst of 10 less alice's) and the rest limited", refused, reviews(), limited)
	}
	if limited.RetryAfter <= 0 || limited.RetryAfter > 500*time.Millisecond || !strings.Contains(limited.Error(), "retry in 1 s") {
		t.Errorf("over the limit: retry after %v (%q), want at most 500ms at 2 a second, said as 1 s", limited.RetryAfter, limited)
	}

	if _, err := pool.For(attacker, "alice"); err != nil || rv.calls["alice"] != 1 {
		t.Errorf("alice, known, from the limited client: %v (%d reviews), want served without a review", err, rv.calls["alice"])
	}
	if _, err := pool.For(attacker, "bogus"); !errors.As(err, new(*live.TooManyNewTokensError)) || rv.calls["bogus"] != 0 {
		t.Errorf("a new token over the limit: %v (%d reviews), want TooManyNewTokensError without a review", err, rv.calls["bogus"])
	}
	if _, err := pool.For(other, "bogus"); !isUnauthorized(err) || rv.calls["bogus"] != 1 {
		t.Errorf("the same token from another client: %v (%d reviews), want reviewed and refused", err, rv.calls["bogus"])
	}
	if _, err := pool.For(attacker, "bogus"); !isUnauthorized(err) || rv.calls["bogus"] != 1 {
		t.Errorf("a refused token from the limited client: %v (%d reviews), want refused from memory, not limited", err, rv.calls["bogus"])
	}
	if _, err := pool.For(ctx, rand.Text()); !isUnauthorized(err) {
		t.Errorf("a new token without a client: %v, want reviewed (Unauthorized)", err)
	}

	clk.SetTime(clk.Now().Add(500 * time.Millisecond))
	if refused, _ := flood(5); refused != 1 {
		t.Errorf("500ms later: %d new tokens reviewed, want 1 at 2 a second", refused)
	}
	// Alice's recheck while the client is over its limit.
	clk.SetTime(clk.Now().Add(5 * time.Minute))
	if refused, _ := flood(20); refused != 10 {
		t.Fatalf("after a refill: %d new tokens reviewed, want the burst of 10", refused)
	}
	if _, err := pool.For(attacker, "alice"); err != nil || rv.calls["alice"] != 2 {
		t.Errorf("alice's recheck from the limited client: %v (%d reviews), want reviewed and served", err, rv.calls["alice"])
	}
}
