package diagnostics

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
)

// Audience is the token audience for diagnostics: tokens minted for it are accepted here and refused by the
// API server.
const Audience = "diagnostics.lvm.topolvm.io"

// TokenHeader carries the bearer token through the API server's pods/proxy, which strips Authorization.
const TokenHeader = "X-LVMS-Diagnostics-Token"

// The RBAC attributes a caller needs: get lvmnodes/diagnostics on the node's LVMNode.
const (
	AuthzGroup       = "lvm.topolvm.io"
	AuthzResource    = "lvmnodes"
	AuthzSubresource = "diagnostics"
	AuthzVerb        = "get"
)

// DefaultCacheTTL is how long an authorization decision is reused for the same token.
const DefaultCacheTTL = time.Minute

// Authorizer decides whether a request may read the diagnostics view and returns who made it.
type Authorizer interface {
	Authorize(ctx context.Context, r *http.Request) (user string, err error)
}

// Errors of authorization, mapped to HTTP statuses by the server.
var (
	// ErrNoToken: the request carries no bearer token.
	ErrNoToken = errors.New("no bearer token: send one in Authorization or " + TokenHeader)
	// ErrUnauthenticated: the API server does not accept the token.
	ErrUnauthenticated = errors.New("the token is not valid (expired, revoked or for another cluster)")
)

// ForbiddenError says the authenticated user may not read the view.
type ForbiddenError struct {
	User, Namespace, Node, Reason string
}

func (e *ForbiddenError) Error() string {
	msg := fmt.Sprintf("user %q may not get %s/%s of LVMNode %s/%s (group %s)", e.User, AuthzResource, AuthzSubresource,
		e.Namespace, e.Node, AuthzGroup)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// statusOf maps an authorization error to an HTTP status and a message for the caller.
func statusOf(err error) (int, string) {
	var forbidden *ForbiddenError
	switch {
	case errors.Is(err, ErrNoToken), errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized, "unauthorized: " + err.Error()
	case errors.As(err, &forbidden):
		return http.StatusForbidden, "forbidden: " + err.Error() + "; grant it with an RBAC rule on lvmnodes/diagnostics"
	}
	return http.StatusServiceUnavailable, "cannot check the caller's token right now; try again"
}

// BearerToken returns the token of a request: Authorization: Bearer, else TokenHeader.
func BearerToken(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return strings.TrimSpace(r.Header.Get(TokenHeader))
}

// TokenReviewer authorizes with the API server: TokenReview, then SubjectAccessReview.
type TokenReviewer struct {
	Reviews authnclient.TokenReviewInterface
	Access  authzclient.SubjectAccessReviewInterface
	// Namespace and Node name the LVMNode whose diagnostics subresource the caller needs.
	Namespace, Node string
	// CacheTTL (default DefaultCacheTTL); negative disables the cache.
	CacheTTL time.Duration
	// Clock tells the time (default the real clock; tests pass a fake).
	Clock clock.PassiveClock

	mu    sync.Mutex
	cache map[[sha256.Size]byte]decision
}

var _ Authorizer = (*TokenReviewer)(nil)

type decision struct {
	user    string
	err     error
	expires time.Time
}

func (t *TokenReviewer) now() time.Time {
	if t.Clock == nil {
		return time.Now()
	}
	return t.Clock.Now()
}

// Authorize checks the request's token and the user's permission. Definite answers (allowed, refused) are
// cached per token hash; failures to reach the API server are not.
func (t *TokenReviewer) Authorize(ctx context.Context, r *http.Request) (string, error) {
	token := BearerToken(r)
	if token == "" {
		return "", ErrNoToken
	}
	key := sha256.Sum256([]byte(token))
	caching := t.CacheTTL >= 0
	ttl := cmp.Or(t.CacheTTL, DefaultCacheTTL)
	if caching {
		t.mu.Lock()
		d, ok := t.cache[key]
		t.mu.Unlock()
		if ok {
			if t.now().Before(d.expires) {
				return d.user, d.err
			}
		}
	}
	user, err := t.review(ctx, token)
	var forbidden *ForbiddenError
	if caching && (err == nil || errors.Is(err, ErrUnauthenticated) || errors.As(err, &forbidden)) {
		t.mu.Lock()
		if t.cache == nil {
			t.cache = map[[sha256.Size]byte]decision{}
		}
		now := t.now()
		for k, d := range t.cache {
			if !now.Before(d.expires) {
				delete(t.cache, k)
			}
		}
		t.cache[key] = decision{user: user, err: err, expires: now.Add(ttl)}
		t.mu.Unlock()
	}
	return user, err
}

func (t *TokenReviewer) review(ctx context.Context, token string) (string, error) {
	// Only a token minted for diagnostics: a caller's own API token, forwarded to every node, would let a
	// compromised node act as that caller against the API server.
	tr, err := t.Reviews.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated || !slices.Contains(tr.Status.Audiences, Audience) {
		return "", ErrUnauthenticated
	}
	info := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(info.Extra))
	for k, v := range info.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := t.Access.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: info.Username, UID: info.UID, Groups: info.Groups, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: t.Namespace, Verb: AuthzVerb, Group: AuthzGroup,
			Resource: AuthzResource, Subresource: AuthzSubresource, Name: t.Node},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("subject access review for %q: %w", info.Username, err)
	}
	if !sar.Status.Allowed {
		return info.Username, &ForbiddenError{User: info.Username, Namespace: t.Namespace, Node: t.Node, Reason: sar.Status.Reason}
	}
	return info.Username, nil
}
