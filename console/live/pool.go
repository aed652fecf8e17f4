package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"sync"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/cache"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	"github.com/lvms-dev/lvms/console"
)

// Pool keeps one Source per caller: the base credentials (a kubeconfig or the pod's service account) for
// requests without a token, and one per bearer token, so every request reads with exactly the caller's
// permissions. A token's source (and its informers) is dropped after it has not been used for IdleTTL.
type Pool struct {
	base    *rest.Config
	opts    Options
	idleTTL time.Duration
	life    context.Context

	mu      sync.Mutex
	entries map[string]*poolEntry

	// refused holds the hashes of refused tokens for RefusedFor; limiters the new-token limit of each
	// client. Both are LRU-bounded, so random tokens or addresses cannot grow them without end.
	refused  *cache.LRUExpireCache
	limitMu  sync.Mutex
	limiters *cache.LRUExpireCache
	// reviews lets concurrent requests with the same token share one TokenReview.
	reviews singleflight.Group
}

// Bounds of the memory of refused tokens and of clients' limits: a few hundred KiB at most. Past them the
// least recently used go, which costs a review, never a wrong answer.
const (
	maxRefused = 4096
	maxClients = 1024
	// clientIdle is how long an unused client's limit is kept; its bucket refills in NewTokenBurst/NewTokenRate
	// (5s by default), so forgetting it later gives nothing away.
	clientIdle = time.Minute
)

type poolEntry struct {
	src      *Source
	client   client.Client
	cancel   context.CancelFunc
	used     time.Time
	reviewed time.Time
}

// DefaultIdleTTL is how long a token's informers live without a request.
const DefaultIdleTTL = 10 * time.Minute

// NewPool returns a pool whose sources live at most as long as life.
func NewPool(life context.Context, base *rest.Config, opts Options, idleTTL time.Duration) *Pool {
	if idleTTL <= 0 {
		idleTTL = DefaultIdleTTL
	}
	opts = opts.withDefaults()
	return &Pool{base: base, opts: opts, idleTTL: idleTTL, life: life, entries: map[string]*poolEntry{},
		refused: cache.NewLRUExpireCacheWithClock(maxRefused, opts.Clock), limiters: cache.NewLRUExpireCacheWithClock(maxClients, opts.Clock)}
}

type clientKey struct{}

// WithClient tells For who sent the request, for the limit on new tokens: the in-cluster console passes the
// request's remote IP. Without it For does not limit.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

// TooManyNewTokensError is For's answer to a client over its limit of new tokens (Options.NewTokenRate):
// nothing was reviewed; retry after RetryAfter.
type TooManyNewTokensError struct {
	Client     string
	Rate       rate.Limit
	Burst      int
	RetryAfter time.Duration
}

func (e *TooManyNewTokensError) Error() string {
	return fmt.Sprintf("too many requests with bearer tokens this console has not seen yet from %s (at most %d at once, then %g a second); "+
		"retry in %d s. Requests with a token it has accepted are not limited", e.Client, e.Burst, float64(e.Rate), RetryAfterSeconds(e.RetryAfter))
}

// RetryAfterSeconds is d as a Retry-After header counts it: whole seconds, rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// reviewFailedError is a TokenReview that could not be made. It does not unwrap: the API server's 401 or 403
// here is about the console's own credentials, and must not read as the caller's.
type reviewFailedError struct{ err error }

func (e *reviewFailedError) Error() string {
	return "the caller's token could not be reviewed: " + e.err.Error()
}

// reviewUnavailable reports whether a TokenReview's error is the call failing (see Options.TokenReview)
// rather than the API server refusing the token.
func reviewUnavailable(err error) bool {
	var status apierrors.APIStatus
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &status) || errors.As(err, &ue) || errors.As(err, &ne) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// For returns the source acting as the caller: token is the bearer token of the request, "" to use the base
// credentials. Tokens are kept only as the key of their source's config; the map is keyed by their hash. With
// Options.TokenReview, a token is reviewed before its first use and every RecheckEvery; one that fails is
// an *console.AccessError (Unauthorized), its informers stop, and it is refused without a review for
// RefusedFor. A review of a token without a source counts against the client's limit (WithClient): over it,
// For returns a *TooManyNewTokensError. A review that could not be made is an error, remembered for nothing.
func (p *Pool) For(ctx context.Context, token string) (console.Source, error) {
	if token == "" || p.opts.TokenReview == nil {
		return p.source(token), nil
	}
	if err := p.review(ctx, token); err != nil {
		return nil, err
	}
	return p.source(token), nil
}

// review reviews token when it is due, sharing the review with concurrent requests for the same token.
func (p *Pool) review(ctx context.Context, token string) error {
	key := keyOf(token)
	if _, due := p.reviewDue(key); !due {
		return nil
	}
	_, err, _ := p.reviews.Do(key, func() (any, error) {
		// Checked again inside: a review that has just ended decided for this request too.
		known, due := p.reviewDue(key)
		if !due {
			return nil, nil
		}
		if reason, ok := p.refused.Get(key); ok {
			return nil, refusedError(reason.(string))
		}
		if !known {
			if err := p.admit(ctx); err != nil {
				return nil, err
			}
		}
		err := p.opts.TokenReview(ctx, token)
		switch {
		case err == nil:
			p.source(token)
			p.markReviewed(key)
			return nil, nil
		case reviewUnavailable(err):
			return nil, &reviewFailedError{err}
		}
		p.refused.Add(key, err.Error(), p.opts.RefusedFor)
		p.drop(key)
		return nil, refusedError(err.Error())
	})
	return err
}

func refusedError(reason string) error {
	return &console.AccessError{Unauthorized: true, Err: fmt.Errorf("the token was refused: %s", reason)}
}

// admit takes one review of a new token from the client's limit.
func (p *Pool) admit(ctx context.Context) error {
	client, ok := ctx.Value(clientKey{}).(string)
	if !ok {
		return nil
	}
	now := p.opts.Clock.Now()
	p.limitMu.Lock()
	lim, ok := p.limiters.Get(client)
	if !ok {
		lim = rate.NewLimiter(p.opts.NewTokenRate, p.opts.NewTokenBurst)
	}
	p.limiters.Add(client, lim, clientIdle) // a client in use keeps its limit
	p.limitMu.Unlock()
	r := lim.(*rate.Limiter).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &TooManyNewTokensError{Client: client, Rate: p.opts.NewTokenRate, Burst: p.opts.NewTokenBurst, RetryAfter: d}
	}
	return nil
}

func keyOf(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// reviewDue reports whether the pool has a source for key and whether the token needs a review.
func (p *Pool) reviewDue(key string) (known, due bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[key]
	return ok, !ok || p.opts.Clock.Since(e.reviewed) >= p.opts.RecheckEvery
}

func (p *Pool) markReviewed(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.entries[key]; ok {
		e.reviewed = p.opts.Clock.Now()
	}
}

func (p *Pool) drop(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.entries[key]; ok {
		e.cancel()
		delete(p.entries, key)
	}
}

// Source is For with the concrete type, for callers that also want Subscribe.
func (p *Pool) source(token string) *Source {
	now := p.opts.Clock.Now()
	key := keyOf(token)
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, e := range p.entries {
		if k != "" && k != key && now.Sub(e.used) > p.idleTTL {
			e.cancel()
			delete(p.entries, k)
		}
	}
	if e, ok := p.entries[key]; ok {
		e.used = now
		return e.src
	}
	cfg := p.base
	if token != "" {
		cfg = rest.AnonymousClientConfig(p.base)
		cfg.BearerToken = token
	}
	ctx, cancel := context.WithCancel(p.life)
	e := &poolEntry{src: New(ctx, cfg, p.opts), cancel: cancel, used: now, reviewed: now}
	p.entries[key] = e
	p.evictOverLimit(key)
	return e.src
}

// evictOverLimit stops the least recently used callers' sources beyond MaxSources (never keep's, never
// the base credentials').
func (p *Pool) evictOverLimit(keep string) {
	for len(p.entries) > p.opts.MaxSources {
		// found, not oldest == "": "" is the base credentials' key.
		var oldest string
		var found bool
		for k, e := range p.entries {
			if k == keep || k == "" {
				continue
			}
			if !found || e.used.Before(p.entries[oldest].used) {
				oldest, found = k, true
			}
		}
		if !found {
			return
		}
		p.entries[oldest].cancel()
		delete(p.entries, oldest)
	}
}

// Base returns the source with the base credentials.
func (p *Pool) Base() *Source { return p.source("") }

// Len is the number of live sources (for tests).
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// Client returns an API client acting as the caller, for the console's writes (the migration wizard):
// token is the request's bearer token, "" for the base credentials. The token is reviewed as For reviews
// it, and the client is kept with the caller's source.
func (p *Pool) Client(ctx context.Context, token string) (client.Client, error) {
	if _, err := p.For(ctx, token); err != nil {
		return nil, err
	}
	key := keyOf(token)
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[key]
	if !ok {
		return nil, &console.AccessError{Unauthorized: true, Err: fmt.Errorf("the caller's session ended; reload the page")}
	}
	if e.client == nil {
		// The snapshot classes are typed here so that a plan sees them as lvms migrate plan does.
		scheme := api.NewScheme()
		utilruntime.Must(snapshotv1.AddToScheme(scheme))
		c, err := client.New(e.src.cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, fmt.Errorf("connect to the API server as the caller: %w", err)
		}
		e.client = c
	}
	return e.client, nil
}
