package move_test

// The crash sweep runs last of the package's tests (go runs files in name order): it is the longest, and
// a mutation run (make mutate, -failfast) stops a mutant's run at its first failing test, so the quick
// tests above decide most mutants before the sweep starts.

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// budget is a client whose writes fail once n have been made: the operator killed at that point.
type budget struct {
	client.Client
	n int
}

var errKilled = errors.New("killed")

func (b *budget) spend() error {
	if b.n <= 0 {
		return errKilled
	}
	b.n--
	return nil
}

func (b *budget) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	if err := b.spend(); err != nil {
		return err
	}
	return b.Client.Create(ctx, o, opts...)
}

func (b *budget) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	if err := b.spend(); err != nil {
		return err
	}
	return b.Client.Update(ctx, o, opts...)
}

func (b *budget) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	if err := b.spend(); err != nil {
		return err
	}
	return b.Client.Patch(ctx, o, p, opts...)
}

func (b *budget) Delete(ctx context.Context, o client.Object, opts ...client.DeleteOption) error {
	if err := b.spend(); err != nil {
		return err
	}
	return b.Client.Delete(ctx, o, opts...)
}

func TestMove_KilledAfterEveryWrite_ResumesAndNeverTwoPVsClaimTheClaim(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	// A whole move, never killed, counts the operator's writes.
	w := newWorld(t)
	w.annotate(moveapi.AnnotationToNode, w.nodeB)
	whole := &budget{Client: env.Client, n: 1 << 20}
	if err := w.drive(w.reconciler(whole), agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 40); err != nil {
		t.Fatalf("the move, never killed: %v", err)
	}
	writes := 1<<20 - whole.n
	if writes == 0 || writes > 40 {
		t.Fatalf("a whole move takes %d operator writes, want 1 to 40", writes)
	}
	t.Logf("a whole move takes %d operator writes; killed after each of them, every move must finish", writes)
	// Each crash point in a world of its own, side by side (the API server is the bottleneck, not a core).
	for k := range writes {
		t.Run(fmt.Sprintf("killed-after-%d", k), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.annotate(moveapi.AnnotationToNode, w.nodeB)
			a := agents{srcSum: sum, dstSum: sum}
			err := w.drive(w.reconciler(&budget{Client: env.Client, n: k}), a, moveapi.PhaseAwaitingConfirmation, 40)
			if !errors.Is(err, errKilled) {
				t.Fatalf("killed after %d of the move's %d writes, the operator did not notice: %v", k, writes, err)
			}
			// The agents and kube-controller-manager carry on while the operator is down.
			for range 2 {
				a.run(w)
				w.kcm()
				w.checkInvariants()
			}
			if err := w.drive(w.reconciler(env.Client), a, moveapi.PhaseAwaitingConfirmation, 40); err != nil {
				t.Fatalf("restarted after %d writes: %v", k, err)
			}
			pvc := w.pvc()
			if np := w.pv(pvc.Spec.VolumeName); np == nil || np.Spec.ClaimRef.UID != pvc.UID || pvc.Labels["app"] != "db" {
				t.Fatalf("restarted after %d writes: the claim is not bound to the new volume", k)
			}
		})
	}
}
