package sandbox

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The sandbox's nodes have no kubelet, so the sandbox renews their node Leases as a kubelet does (every
// 10 s, 40 s valid): kube-controller-manager's node lifecycle controller would otherwise mark them
// NotReady after its grace period and taint them, and the scheduler would place no pod on them.
const (
	heartbeatEvery = 10 * time.Second
	leaseSeconds   = 40
)

// heartbeat renews node's Lease until ctx ends; a failed renewal is logged and tried again next time.
func (s *sandbox) heartbeat(ctx context.Context, node string) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := renewLease(ctx, s.c, node, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Error(err, "Failed to renew the node Lease", "node", node)
		}
	}, heartbeatEvery)
}

func renewLease(ctx context.Context, c client.Client, node string, now time.Time) error {
	l := &coordinationv1.Lease{}
	err := c.Get(ctx, client.ObjectKey{Namespace: "kube-node-lease", Name: node}, l)
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: node},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](leaseSeconds),
				RenewTime: &metav1.MicroTime{Time: now}}}
		return c.Create(ctx, l)
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	return c.Update(ctx, l)
}
