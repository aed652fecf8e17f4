package move

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	clientretry "k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
)

// The front ends (`lvms move`, the console) call these with the user's own client: what a user may do to
// a move is what the API server lets them do to the claim.

// GetStatus reads the move status the claim shows; ok is false when it shows none.
func GetStatus(ctx context.Context, c client.Client, key types.NamespacedName) (st moveapi.Status, ok bool, err error) {
	pvc, err := getClaim(ctx, c, key)
	if err != nil {
		return moveapi.Status{}, false, err
	}
	return moveapi.ParseStatus(pvc)
}

// Request asks to move the claim's volume to node. The operator runs the preflight and shows the result
// on the claim (GetStatus).
func Request(ctx context.Context, c client.Client, key types.NamespacedName, node string) error {
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return fmt.Errorf("--to-node %q is not a node name: %v", node, errs)
	}
	return retryIfChanged(func() error { return request(ctx, c, key, node) })
}

func request(ctx context.Context, c client.Client, key types.NamespacedName, node string) error {
	pvc, err := getClaim(ctx, c, key)
	if err != nil {
		return err
	}
	if err := mayDelete(ctx, c, key, "ask for its move"); err != nil {
		return err
	}
	st, ok, _ := moveapi.ParseStatus(pvc)
	if ok && st.Phase.Active() {
		if st.TargetNode != node {
			return fmt.Errorf("claim %s is being moved to %s (move %s, %s): abort that move first (lvms move abort)", key, st.TargetNode, st.ID, st.Phase)
		}
		return annotate(ctx, c, pvc, map[string]string{moveapi.AnnotationToNode: node}, moveapi.AnnotationAbort, moveapi.AnnotationConfirm)
	}
	// A new request: the status of the last one (a refusal, an ended move) goes, so the operator looks again.
	return annotate(ctx, c, pvc, map[string]string{moveapi.AnnotationToNode: node}, moveapi.AnnotationAbort, moveapi.AnnotationConfirm, moveapi.AnnotationStatus)
}

// Confirm releases the source of the claim's move once the claim uses the new volume. id must be the
// move's ID as GetStatus shows it, so a confirmation never applies to another move.
func Confirm(ctx context.Context, c client.Client, key types.NamespacedName, id string) error {
	return retryIfChanged(func() error { return confirm(ctx, c, key, id) })
}

func confirm(ctx context.Context, c client.Client, key types.NamespacedName, id string) error {
	pvc, err := getClaim(ctx, c, key)
	if err != nil {
		return err
	}
	st, ok, err := moveapi.ParseStatus(pvc)
	if err != nil {
		return err
	}
	if !ok || st.Phase != moveapi.PhaseAwaitingConfirmation {
		return fmt.Errorf("claim %s has no move waiting for confirmation (status %q): see lvms move status", key, st.Phase)
	}
	if id != st.ID {
		return fmt.Errorf("move %q is not the claim's move (%s): confirm the ID lvms move status shows", id, st.ID)
	}
	if err := mayDelete(ctx, c, key, "confirm its move"); err != nil {
		return err
	}
	return annotate(ctx, c, pvc, map[string]string{moveapi.AnnotationConfirm: id})
}

// Abort asks to abort the claim's move. Before the swap the operator deletes the target volume and the
// claim keeps its volume; from the swap on, or with no move or request standing, an abort is refused.
func Abort(ctx context.Context, c client.Client, key types.NamespacedName) error {
	return retryIfChanged(func() error { return abort(ctx, c, key) })
}

func abort(ctx context.Context, c client.Client, key types.NamespacedName) error {
	pvc, err := getClaim(ctx, c, key)
	if err != nil {
		return err
	}
	st, ok, err := moveapi.ParseStatus(pvc)
	if err != nil {
		return err
	}
	switch {
	case !ok && pvc.Annotations[moveapi.AnnotationToNode] == "":
		return fmt.Errorf("claim %s is not being moved", key)
	case st.Phase.PastAbort():
		return fmt.Errorf("claim %s is past the point of abort (%s): it uses or is switching to the new volume; to go back, confirm the move (lvms move confirm) and then move the claim back with lvms move pvc", key, st.Phase)
	case !st.Phase.Active() && pvc.Annotations[moveapi.AnnotationToNode] == "":
		return fmt.Errorf("claim %s is not being moved (its last move is %s): nothing to abort", key, st.Phase)
	case !st.Phase.Active():
		// Only a request or a refusal: withdraw the request.
		return annotate(ctx, c, pvc, nil, moveapi.AnnotationToNode)
	}
	return annotate(ctx, c, pvc, map[string]string{moveapi.AnnotationAbort: st.ID})
}

// retryIfChanged runs a read-check-write of the claim again when the claim changed between its read and its
// write (the patch is guarded by the resource version): the operator annotates claims while they move, so a
// user's request must not fail on that, nor be decided on what the claim was.
func retryIfChanged(fn func() error) error {
	return clientretry.RetryOnConflict(clientretry.DefaultRetry, fn)
}

// mayDelete refuses, with a clear message, a user who may not delete the claim: a move deletes the claim and
// creates it again, so only such a user may ask for one or confirm it. The admission policy
// lvms-move-requests enforces it; this asks first (SelfSubjectAccessReview) so the user reads why. A review
// that cannot be made leaves the decision to the policy.
func mayDelete(ctx context.Context, c client.Client, key types.NamespacedName, what string) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: key.Namespace, Verb: "delete", Resource: "persistentvolumeclaims", Name: key.Name}}}
	if err := c.Create(ctx, review); err != nil || review.Status.Allowed {
		return nil
	}
	return fmt.Errorf("you may not delete claim %s, so you may not %s: a move deletes the claim and creates it again bound to the new volume; ask someone who may delete it", key, what)
}

func getClaim(ctx context.Context, c client.Client, key types.NamespacedName) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, key, pvc); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("claim %s does not exist", key)
	} else if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("you may not read claim %s (%v): a move needs get, patch and delete on the claim in its namespace", key, err)
	} else if err != nil {
		return nil, fmt.Errorf("get claim %s: %w", key, err)
	}
	return pvc, nil
}

// annotate sets and removes claim annotations with a merge patch guarded by the claim's UID.
func annotate(ctx context.Context, c client.Client, pvc *corev1.PersistentVolumeClaim, set map[string]string, remove ...string) error {
	base := pvc.DeepCopy()
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	for k, v := range set {
		pvc.Annotations[k] = v
	}
	for _, k := range remove {
		delete(pvc.Annotations, k)
	}
	err := c.Patch(ctx, pvc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("you may not patch claim %s/%s (%v): a move needs get, patch and delete on the claim in its namespace", pvc.Namespace, pvc.Name, err)
	}
	if err != nil {
		return fmt.Errorf("annotate claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}
