package move

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	moveapi "github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// Backoff bounds the wait between two looks at a claim whose move waits for something that sends no event
// (pods going away, an agent): it doubles from the first to the last while nothing changes.
var (
	BackoffFirst = time.Second
	BackoffLast  = time.Minute
)

// workers is how many claims' moves advance at once.
const workers = 4

// SetupWithManager runs the Reconciler for the claims of moves. It looks at a claim when the claim carries
// a move annotation, when the source PV's Record changes, and when an agent reports on a move's
// LogicalVolume; what sends no event (pods going away) is looked at again with a backoff per claim. Lookups
// go through the cache's indexes (the PV of a claim's move, the LogicalVolume of a volume ID).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	ctx := context.Background()
	for _, index := range []string{indexRecordClaim, indexRecordID} {
		if err := idx.IndexField(ctx, &corev1.PersistentVolume{}, index, func(o client.Object) []string {
			return recordKeys(o.(*corev1.PersistentVolume), index)
		}); err != nil {
			return fmt.Errorf("index PersistentVolumes by %s: %w", index, err)
		}
	}
	if err := idx.IndexField(ctx, &topolvmv1.LogicalVolume{}, indexVolumeID, func(o client.Object) []string {
		if id := o.(*topolvmv1.LogicalVolume).Status.VolumeID; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index LogicalVolumes by volume ID: %w", err)
	}
	r.indexed = true
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](BackoffFirst, BackoffLast)
	return ctrl.NewControllerManagedBy(mgr).Named("move").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(hasMoveAnnotation))).
		Watches(&corev1.PersistentVolume{}, handler.EnqueueRequestsFromMapFunc(recordClaim),
			builder.WithPredicates(predicate.NewPredicateFuncs(hasRecord))).
		Watches(&topolvmv1.LogicalVolume{}, handler.EnqueueRequestsFromMapFunc(r.volumeClaim(mgr.GetClient())),
			builder.WithPredicates(predicate.NewPredicateFuncs(inMove))).
		Complete(backingOff(limiter, r.Reconcile))
}

// backingOff runs step for a claim and, while the move waits on what sends no event, looks again after
// limiter's next delay for that claim; an error or a step that needs no wait starts the claim's delay afresh
// (errors back off in the controller's own queue).
func backingOff(limiter workqueue.TypedRateLimiter[reconcile.Request], step func(context.Context, types.NamespacedName) (Result, error)) reconcile.Func {
	return func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := step(ctx, req.NamespacedName)
		if err != nil || !res.Wait {
			limiter.Forget(req)
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: limiter.When(req)}, nil
	}
}

// hasRecord: a PersistentVolume that is or was a move's source.
func hasRecord(o client.Object) bool { return o.GetAnnotations()[AnnotationRecord] != "" }

// inMove: a LogicalVolume that is a move's source or target.
func inMove(o client.Object) bool { return volumeMoveID(o) != "" }

func hasMoveAnnotation(o client.Object) bool {
	for k := range o.GetAnnotations() {
		if strings.HasPrefix(k, moveapi.Prefix) {
			return true
		}
	}
	return false
}

// recordClaim maps a source PV to the claim its Record names.
func recordClaim(_ context.Context, o client.Object) []reconcile.Request {
	pv, ok := o.(*corev1.PersistentVolume)
	if !ok {
		return nil
	}
	rec, err := recordOf(pv)
	if err != nil || rec == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rec.Namespace, Name: rec.Claim}}}
}

// volumeMoveID is the ID of the move a LogicalVolume takes part in: the target carries it (moveapi.AnnotationID),
// the source names it last in its send-to.
func volumeMoveID(o client.Object) string {
	a := o.GetAnnotations()
	if id := a[moveapi.AnnotationID]; id != "" {
		return id
	}
	if to := a[moveapi.AnnotationSendTo]; to != "" {
		return to[strings.LastIndex(to, "/")+1:]
	}
	return ""
}

// volumeClaim maps a move's LogicalVolume to the claim of the active Record with its move ID (from the
// cache's index).
func (r *Reconciler) volumeClaim(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &corev1.PersistentVolumeList{}
		if err := c.List(ctx, list, client.MatchingFields{indexRecordID: volumeMoveID(o)}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Map a moved LogicalVolume to its claim", "logicalVolume", o.GetName())
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if rec, err := recordOf(&list.Items[i]); err == nil && rec != nil {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rec.Namespace, Name: rec.Claim}})
			}
		}
		return out
	}
}
