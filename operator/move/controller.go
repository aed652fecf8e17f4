package move

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	moveapi "github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// SetupWithManager runs the Reconciler for the claims of moves. It looks at a claim when the claim carries
// a move annotation, when the source PV's Record changes, and when an agent reports on a move's
// LogicalVolume; everything else (pods going away, a node's capacity) is seen by RequeueAfter.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("move").
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(hasMoveAnnotation))).
		Watches(&corev1.PersistentVolume{}, handler.EnqueueRequestsFromMapFunc(recordClaim),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetAnnotations()[AnnotationRecord] != "" }))).
		Watches(&topolvmv1.LogicalVolume{}, handler.EnqueueRequestsFromMapFunc(r.volumeClaim(mgr.GetClient())),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return volumeMoveID(o) != "" }))).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			res, err := r.Reconcile(ctx, req.NamespacedName)
			return reconcile.Result{RequeueAfter: res.RequeueAfter}, err
		}))
}

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

// volumeClaim maps a move's LogicalVolume to the claim of the Record with its move ID (from the cache).
func (r *Reconciler) volumeClaim(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		id := volumeMoveID(o)
		list := &corev1.PersistentVolumeList{}
		if err := c.List(ctx, list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Map a moved LogicalVolume to its claim", "logicalVolume", o.GetName())
			return nil
		}
		for i := range list.Items {
			if rec, err := recordOf(&list.Items[i]); err == nil && rec != nil && rec.ID == id {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rec.Namespace, Name: rec.Claim}}}
			}
		}
		return nil
	}
}
