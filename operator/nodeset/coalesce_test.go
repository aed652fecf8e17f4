package nodeset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/nodeset"
)

// TestCoalesced counts the reconciles a burst of events makes: the create, update and delete events of
// 1,000 LVMNodes, all mapped to the same key, become one request once the delay passes on a fake clock,
// and an event after that request was handed out makes one more.
func TestCoalesced(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clock})
	defer q.ShutDown()
	key := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "set"}}
	mapped := 0
	h := nodeset.Coalesced(func(context.Context, client.Object) []reconcile.Request {
		mapped++
		return []reconcile.Request{key}
	})
	ctx := context.Background()
	burst := func(n int) {
		for i := range n {
			o := &lvmv2.LVMNode{}
			o.Name = fmt.Sprintf("node-%d", i)
			h.Create(ctx, event.CreateEvent{Object: o}, q)
			h.Update(ctx, event.UpdateEvent{ObjectOld: o, ObjectNew: o}, q)
			h.Delete(ctx, event.DeleteEvent{Object: o}, q)
		}
	}
	// reconciles takes what the queue hands out once the fake clock passed the delay.
	reconciles := func() int {
		clock.Step(nodeset.CoalesceDelay)
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return q.Len() > 0, nil
		}); err != nil {
			t.Fatalf("nothing queued after the delay: %v", err)
		}
		n := 0
		for q.Len() > 0 {
			item, _ := q.Get()
			if item != key {
				t.Errorf("queued %v, want %v", item, key)
			}
			q.Done(item)
			n++
		}
		return n
	}

	burst(1000)
	if mapped != 4000 {
		t.Errorf("the map function ran %d times for 4,000 objects in events, want 4,000", mapped)
	}
	if q.Len() != 0 {
		t.Errorf("%d requests ready before the delay passed, want 0", q.Len())
	}
	if n := reconciles(); n != 1 {
		t.Errorf("%d reconciles for a burst of 3,000 events, want 1", n)
	}
	burst(1)
	if n := reconciles(); n != 1 {
		t.Errorf("%d reconciles for an event after the burst's reconcile, want 1", n)
	}
}
