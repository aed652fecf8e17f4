package lvmd

import (
	"bytes"
	"context"
	"os"
	"sync"
	"time"
)

// DefaultPollInterval is how often a Watcher looks at the file. Looking is one stat call; the file is
// read only when its size, modification time or inode changed.
const DefaultPollInterval = 2 * time.Second

// Watcher keeps the current lvmd.yaml in memory and tells subscribers when it changes. It never exits on
// a bad file: Current returns the error until the file is fixed.
type Watcher struct {
	path     string
	interval time.Duration

	mu      sync.RWMutex
	cfg     *Config
	err     error
	raw     []byte
	stamp   fileStamp
	loaded  bool
	subs    []chan struct{}
	changes chan struct{}
}

type fileStamp struct {
	exists  bool
	size    int64
	modTime time.Time
	inode   uint64
}

// NewWatcher watches path; interval 0 means DefaultPollInterval. It reads the file once right away.
func NewWatcher(path string, interval time.Duration) *Watcher {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	w := &Watcher{path: path, interval: interval}
	w.check()
	return w
}

// Path is the watched file.
func (w *Watcher) Path() string { return w.path }

// Current returns the configuration last read, or why it could not be read (missing file, malformed
// YAML, unknown keys). The returned Config must not be modified.
func (w *Watcher) Current() (*Config, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.cfg, w.err
}

// Changes returns a channel that receives a value (coalesced) after every change of the file's content or
// readability. Each call returns a new subscription.
func (w *Watcher) Changes() <-chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.subs = append(w.subs, ch)
	w.mu.Unlock()
	return ch
}

// Run polls the file until ctx ends. It is a controller-runtime Runnable: mgr.Add(manager.RunnableFunc(w.Run)).
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.check()
		}
	}
}

// Reload reads the file now (the agent calls it right after writing the file itself).
func (w *Watcher) Reload() { w.check() }

func (w *Watcher) check() {
	st := stampOf(w.path)
	w.mu.RLock()
	same := w.loaded && st == w.stamp
	w.mu.RUnlock()
	if same {
		return
	}
	raw, readErr := os.ReadFile(w.path)
	var cfg *Config
	err := readErr
	if readErr == nil {
		cfg, err = Parse(raw)
		if err != nil {
			err = &InvalidError{Path: w.path, Err: err}
		}
	}
	w.mu.Lock()
	changed := !w.loaded || !bytes.Equal(raw, w.raw) || errString(err) != errString(w.err)
	w.cfg, w.err, w.raw, w.stamp, w.loaded = cfg, err, raw, st, true
	subs := w.subs
	w.mu.Unlock()
	if !changed {
		return
	}
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default: // a notification is already pending
		}
	}
}

// InvalidError is a file that exists but is not valid lvmd.yaml.
type InvalidError struct {
	Path string
	Err  error
}

func (e *InvalidError) Error() string { return e.Path + " is not valid lvmd.yaml: " + e.Err.Error() }

// Unwrap returns the parse error.
func (e *InvalidError) Unwrap() error { return e.Err }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
