package move_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/move"
)

// userIn returns a client acting as a user who may get, patch and delete claims in namespace ns only (what a
// move needs: it deletes the claim and creates it again).
func userIn(t *testing.T, user, ns string) client.Client {
	return userWith(t, user, ns, "get", "patch", "delete")
}

// userWith returns a client acting as a user with verbs on the claims of namespace ns only.
func userWith(t *testing.T, user, ns string, verbs ...string) client.Client {
	t.Helper()
	testenv.Require(t)
	env.GrantIn(t, ns, "claims-"+user, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}, rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: verbs})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	must(t, err)
	return c
}

func TestFrontEnd_ActsWithTheUsersRightsOnly(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	mine, theirs := newWorld(t), newWorld(t)
	alice := userIn(t, "alice", mine.ns)

	err := move.Request(ctx(t), alice, theirs.claim, theirs.nodeB)
	if err == nil || !strings.Contains(err.Error(), "you may not read claim "+theirs.claim.String()) {
		t.Fatalf("a request for another namespace's claim: %v", err)
	}
	if _, ok := theirs.pvc().Annotations[moveapi.AnnotationToNode]; ok {
		t.Fatal("another namespace's claim was annotated")
	}

	must(t, move.Request(ctx(t), alice, mine.claim, mine.nodeB))
	if got := mine.pvc().Annotations[moveapi.AnnotationToNode]; got != mine.nodeB {
		t.Fatalf("to-node annotation %q", got)
	}
	if err := move.Request(ctx(t), alice, mine.claim, "Not_A_Node"); err == nil || !strings.Contains(err.Error(), "is not a node name") {
		t.Errorf("a bad node name: %v", err)
	}
	if err := move.Confirm(ctx(t), alice, mine.claim, "x"); err == nil || !strings.Contains(err.Error(), "has no move waiting for confirmation") {
		t.Errorf("confirming before the swap: %v", err)
	}

	r := mine.reconciler(env.Client)
	must(t, mine.drive(r, agents{}, moveapi.PhaseCopying, 10))
	st, ok, err := move.GetStatus(ctx(t), alice, mine.claim)
	if err != nil || !ok || st.Phase != moveapi.PhaseCopying || st.TargetNode != mine.nodeB {
		t.Fatalf("status as the user: %+v %v %v", st, ok, err)
	}
	// The move's own ID does not confirm a move still copying.
	if err := move.Confirm(ctx(t), alice, mine.claim, st.ID); err == nil || !strings.Contains(err.Error(), "has no move waiting for confirmation") {
		t.Errorf("confirming a move that is copying: %v", err)
	}
	if err := move.Request(ctx(t), alice, mine.claim, mine.ns+"-elsewhere"); err == nil || !strings.Contains(err.Error(), "abort that move first") {
		t.Errorf("a second move while one runs: %v", err)
	}
	must(t, move.Abort(ctx(t), alice, mine.claim))
	_, err = r.Reconcile(ctx(t), mine.claim)
	must(t, err)
	if st, _, _ := move.GetStatus(ctx(t), alice, mine.claim); st.Phase != moveapi.PhaseAborted {
		t.Fatalf("after abort: %+v", st)
	}
	// Nothing stands any more: a second abort says so instead of pretending to do something.
	if err := move.Abort(ctx(t), alice, mine.claim); err == nil || !strings.Contains(err.Error(), "is not being moved (its last move is Aborted)") {
		t.Errorf("abort with only an aborted move behind: %v", err)
	}

	// Moved and swapped: abort is refused, confirmation needs the move's ID.
	must(t, move.Request(ctx(t), alice, mine.claim, mine.nodeB))
	must(t, mine.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 40))
	if err := move.Abort(ctx(t), alice, mine.claim); err == nil || !strings.Contains(err.Error(), "past the point of abort") {
		t.Errorf("abort after the swap: %v", err)
	}
	st, _, _ = move.GetStatus(ctx(t), alice, mine.claim)
	if err := move.Confirm(ctx(t), alice, mine.claim, "0123"); err == nil || !strings.Contains(err.Error(), "is not the claim's move") {
		t.Errorf("confirming another ID: %v", err)
	}
	must(t, move.Confirm(ctx(t), alice, mine.claim, st.ID))
	_, err = r.Reconcile(ctx(t), mine.claim)
	must(t, err)
	if st, _, _ := move.GetStatus(ctx(t), alice, mine.claim); st.Phase != moveapi.PhaseDone {
		t.Fatalf("after confirm: %+v", st)
	}
}

// A user who may patch the claim but not delete it is told, before anything is written, that a move needs
// delete (the admission policy lvms-move-requests refuses the annotation anyway: deploy's tests).
func TestFrontEnd_PatchOnly_ToldAMoveNeedsDelete(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w := newWorld(t)
	bob := userWith(t, "bob", w.ns, "get", "patch")
	err := move.Request(ctx(t), bob, w.claim, w.nodeB)
	if err == nil || !strings.Contains(err.Error(), "you may not delete claim "+w.claim.String()+", so you may not ask for its move: a move deletes the claim and creates it again") {
		t.Fatalf("a patch-only user's request: %v", err)
	}
	if _, ok := w.pvc().Annotations[moveapi.AnnotationToNode]; ok {
		t.Fatal("the claim was annotated")
	}
}

// The claim changes between the user's read and write (the operator annotates moving claims): the request is
// decided again on the claim as it is now, not failed with a conflict, nor written over what changed.
func TestFrontEnd_ClaimChangedMeanwhile_DecidedAgain(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w := newWorld(t)
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	must(t, err)
	var patches int
	meanwhile := func(change func(*corev1.PersistentVolumeClaim)) client.Client {
		patches = 0
		return interceptor.NewClient(base, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if patches++; patches == 1 {
					pvc := w.pvc()
					if pvc.Annotations == nil {
						pvc.Annotations = map[string]string{}
					}
					change(pvc)
					must(t, env.Client.Update(ctx, pvc))
				}
				return c.Patch(ctx, obj, patch, opts...)
			}})
	}

	// Something unrelated changed: the request goes through on the second attempt, keeping the change.
	c := meanwhile(func(pvc *corev1.PersistentVolumeClaim) { pvc.Annotations["example.com/owner"] = "team-a" })
	must(t, move.Request(ctx(t), c, w.claim, w.nodeB))
	if got := w.pvc().Annotations; got[moveapi.AnnotationToNode] != w.nodeB || got["example.com/owner"] != "team-a" || patches != 2 {
		t.Fatalf("after a concurrent change: annotations %v, %d patches; want the request and the change, 2 patches", got, patches)
	}

	// A move to another node started meanwhile: the second look refuses, as a first one would have.
	other := moveapi.Status{ID: "m1", Phase: moveapi.PhaseCopying, TargetNode: w.ns + "-elsewhere"}
	c = meanwhile(func(pvc *corev1.PersistentVolumeClaim) { pvc.Annotations[moveapi.AnnotationStatus] = other.Encode() })
	if err := move.Request(ctx(t), c, w.claim, w.nodeB+"-x"); err == nil || !strings.Contains(err.Error(), "abort that move first") {
		t.Fatalf("a request while a move started meanwhile: %v, want it refused", err)
	}
}
