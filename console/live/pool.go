package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
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
}

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
	return &Pool{base: base, opts: opts.withDefaults(), idleTTL: idleTTL, life: life, entries: map[string]*poolEntry{}}
}

// For returns the source acting as the caller: token is the bearer token of the request, "" to use the base
// credentials. Tokens are kept only as the key of their source's config; the map is keyed by their hash. With
// Options.TokenReview, a token is reviewed before its first use and every RecheckEvery; one that fails is
// an *console.AccessError (Unauthorized) and its informers stop.
func (p *Pool) For(ctx context.Context, token string) (console.Source, error) {
	if token == "" || p.opts.TokenReview == nil {
		return p.source(token), nil
	}
	key := keyOf(token)
	if p.reviewDue(key) {
		if err := p.opts.TokenReview(ctx, token); err != nil {
			p.drop(key)
			return nil, &console.AccessError{Unauthorized: true, Err: fmt.Errorf("the token was refused: %w", err)}
		}
		defer p.markReviewed(key)
	}
	return p.source(token), nil
}

func keyOf(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func (p *Pool) reviewDue(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[key]
	return !ok || p.opts.Clock.Since(e.reviewed) >= p.opts.RecheckEvery
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
