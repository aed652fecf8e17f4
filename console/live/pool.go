package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"k8s.io/client-go/rest"

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
	src    *Source
	cancel context.CancelFunc
	used   time.Time
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
// credentials. Tokens are kept only as the key of their source's config; the map is keyed by their hash.
func (p *Pool) For(_ context.Context, token string) (console.Source, error) {
	return p.source(token), nil
}

// Source is For with the concrete type, for callers that also want Subscribe.
func (p *Pool) source(token string) *Source {
	now := p.opts.Clock.Now()
	key := ""
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		key = hex.EncodeToString(sum[:])
	}
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
	e := &poolEntry{src: New(ctx, cfg, p.opts), cancel: cancel, used: now}
	p.entries[key] = e
	return e.src
}

// Base returns the source with the base credentials.
func (p *Pool) Base() *Source { return p.source("") }

// Len is the number of live sources (for tests).
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}
