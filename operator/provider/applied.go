package provider

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// appliedMemo remembers, per object, the configuration this operator last applied and the version of the
// object the API server answered with. While the object is still at that version, applying the same
// configuration again would change nothing: the reconcile skips the request. A node set's convergence
// reconciles the driver objects once per batch of new LVMNodes; without this, each was a no-op write.
type appliedMemo struct {
	mu sync.Mutex
	m  map[string]appliedEntry
}

type appliedEntry struct {
	config  [sha256.Size]byte
	version string
}

// fingerprint is what identifies a configuration; ok is false when it cannot be rendered (then it is
// always applied).
func fingerprint(cfg any) (sum [sha256.Size]byte, ok bool) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return sum, false
	}
	return sha256.Sum256(data), true
}

// current reports whether cfg was the last configuration applied to key and the object is still at the
// version that apply produced.
func (a *appliedMemo) current(key string, cfg [sha256.Size]byte, version string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[key]
	return ok && version != "" && e.config == cfg && e.version == version
}

// record remembers an apply; an empty version (unknown) forgets the object.
func (a *appliedMemo) record(key string, cfg [sha256.Size]byte, version string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]appliedEntry{}
	}
	if version == "" {
		delete(a.m, key)
		return
	}
	a.m[key] = appliedEntry{config: cfg, version: version}
}
