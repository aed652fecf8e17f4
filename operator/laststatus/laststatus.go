// Package laststatus remembers the status a controller last wrote for each object. A reconcile that starts
// from an informer cache which has not received that write yet would otherwise compare against the status
// before it, write the same status again (and announce the same transition twice): an idle operator's
// stray writes. With Recall it starts from the status the API server holds instead.
package laststatus

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Memory holds, per object, the resourceVersion a status write was computed from and the status written.
// The zero value is ready to use; it is safe for concurrent reconciles.
type Memory[S interface{ DeepCopy() S }] struct {
	mu sync.Mutex
	m  map[types.NamespacedName]entry[S]
}

type entry[S any] struct {
	uid    types.UID
	from   string // the resourceVersion of the object the written status was computed from
	status S
}

// Recall returns the status last written for obj when obj is still the version that write was computed
// from: the cache has not seen the write, so the server holds the returned status, not obj's. A newer
// version (the write seen, or someone else's) or another object of the same name returns false.
func (m *Memory[S]) Recall(obj client.Object) (S, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[client.ObjectKeyFromObject(obj)]
	if !ok || e.uid != obj.GetUID() || e.from != obj.GetResourceVersion() {
		var zero S
		return zero, false
	}
	return e.status.DeepCopy(), true
}

// Remember records that status was written for obj, computed from the object at resourceVersion from.
func (m *Memory[S]) Remember(obj client.Object, from string, status S) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[types.NamespacedName]entry[S]{}
	}
	m.m[client.ObjectKeyFromObject(obj)] = entry[S]{uid: obj.GetUID(), from: from, status: status.DeepCopy()}
}

// Forget drops what was remembered for the object named key (it is gone).
func (m *Memory[S]) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}
