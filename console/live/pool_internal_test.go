package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// Random tokens from many addresses do not grow the pool's memory without bound: the refused tokens and the
// clients' limits it keeps stay within maxRefused and maxClients (the least recently used go, so the first
// refused token is reviewed again), and no source is kept for a refused token.
func TestPool_RandomTokensStayBounded(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2032, 3, 4, 5, 6, 7, 0, time.UTC))
	calls := map[string]int{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := NewPool(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, Options{Clock: clk, TokenReview: func(_ context.Context, token string) error {
		calls[token]++
		return errors.New("token not authenticated")
	}}, time.Hour)
	n := maxRefused + maxClients
	for i := range n {
		client := WithClient(ctx, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		if _, err := p.For(client, fmt.Sprintf("token-%d", i)); err == nil {
			t.Fatal("a random token was accepted")
		}
	}
	if got := len(p.refused.Keys()); got != maxRefused {
		t.Errorf("%d refused tokens remembered after %d, want at most %d", got, n, maxRefused)
	}
	if got := len(p.limiters.Keys()); got != maxClients {
		t.Errorf("%d clients' limits kept after %d, want at most %d", got, n, maxClients)
	}
	if p.Len() != 0 {
		t.Errorf("%d sources kept for refused tokens", p.Len())
	}
	_, _ = p.For(ctx, "token-0")
	if calls["token-0"] != 2 {
		t.Errorf("the least recently refused token was reviewed %d times, want again once forgotten", calls["token-0"])
	}
}

// What a TokenReview's error means, with the errors client-go returns wrapped as lvms's reviewer wraps them:
// the call failing is never taken for a refusal, which would be remembered.
func TestReviewUnavailable(t *testing.T) {
	tokenReviews := schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"API server unavailable", apierrors.NewServiceUnavailable("etcdserver: leader changed"), true},
		{"API server throttling", apierrors.NewTooManyRequests("slow down", 1), true},
		{"console's own credentials forbidden", apierrors.NewForbidden(tokenReviews, "", errors.New("no RBAC")), true},
		{"console's own credentials rejected", apierrors.NewUnauthorized("expired"), true},
		{"connection refused", &url.Error{Op: "Post", URL: "https://10.0.0.1/apis", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, true},
		{"timeout", context.DeadlineExceeded, true},
		{"refused by the API server", errors.New("the API server does not accept it (token expired)"), false},
	} {
		if got := reviewUnavailable(fmt.Errorf("review the token: %w", tc.err)); got != tc.want {
			t.Errorf("%s: unavailable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
