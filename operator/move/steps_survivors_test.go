package move_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

// The cases steps.go's mutation run (e2e/tools/mutate-survivors.txt) found no test telling apart: each
// test names the line it covers.

// A move goes on waiting while only one agent has reported its digest (steps.go:91).
func TestMove_Copying_WaitsForBothDigests(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	for _, a := range []agents{{srcSum: sum}, {dstSum: sum}} {
		w, r := newMove(t)
		if err := w.drive(r, a, moveapi.PhaseSwapping, 12); err == nil {
			t.Fatalf("agents %+v: the move reached the swap with one digest", a)
		}
		if st := w.status(); st.Phase != moveapi.PhaseCopying || st.Message != "copying" {
			t.Fatalf("agents %+v: status %+v, want Copying, waiting", a, st)
		}
	}
}

// A target LogicalVolume gone during the copy stops the move, named (steps.go:82); an abort then still
// returns to the start although there is no target to delete (steps.go:344).
func TestMove_Copying_TargetGone_StopsAndAbortStillWorks(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	w.removeLV(w.status().TargetPV)
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); st.Phase != moveapi.PhaseCopying || !strings.Contains(st.Message, "disappeared during the copy") {
		t.Fatalf("status %+v, want the move stopped naming the volume gone", st)
	}
	w.annotate(moveapi.AnnotationAbort, "true")
	_, err = r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); st.Phase != moveapi.PhaseAborted {
		t.Fatalf("status %+v after the abort, want Aborted", st)
	}
}

// A LogicalVolume with the target's name that is another move's is never adopted (steps.go:48) nor
// deleted by an abort (steps.go:347).
func TestMove_TargetOfAnotherMove_NeitherAdoptedNorDeleted(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	for w.status().TargetPV == "" || w.lv(w.status().TargetPV) == nil {
		_, err := r.Reconcile(ctx(t), w.claim)
		must(t, err)
	}
	target := w.status().TargetPV
	w.setLVAnnotation(target, moveapi.AnnotationID, "another-move")
	if err := w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseCopying, 6); err == nil {
		t.Fatal("the move copies into another move's LogicalVolume")
	}
	if st := w.status(); !strings.Contains(st.Message, "exists and is not this move's") {
		t.Fatalf("status %+v, want the foreign target named", st)
	}
	w.annotate(moveapi.AnnotationAbort, "true")
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if lv := w.lv(target); lv == nil || !lv.DeletionTimestamp.IsZero() {
		t.Fatal("the abort deleted another move's LogicalVolume")
	}
}

// An abort releases only this move's hold: a hold another move set on the source stays (steps.go:366),
// and both copy instructions are gone from the source and the target (steps.go:248).
func TestMove_Abort_ReleasesOnlyItsOwnHold(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	target := w.status().TargetPV
	w.setLVAnnotation(w.sourceLV, moveapi.AnnotationHold, "another-move")
	w.annotate(moveapi.AnnotationAbort, "true")
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	src := w.lv(w.sourceLV)
	if src.Annotations[moveapi.AnnotationHold] != "another-move" {
		t.Errorf("source hold after the abort = %q, want another move's kept", src.Annotations[moveapi.AnnotationHold])
	}
	noCopyInstructions(t, w, "the abort", w.sourceLV, target)
}

// noCopyInstructions fails t when one of the LogicalVolumes that exist still tells an agent to copy.
func noCopyInstructions(t *testing.T, w *world, after string, names ...string) {
	t.Helper()
	for _, name := range names {
		lv := w.lv(name)
		if lv == nil {
			continue
		}
		for _, k := range []string{moveapi.AnnotationSendTo, moveapi.AnnotationReceiveFrom} {
			if v, ok := lv.Annotations[k]; ok {
				t.Errorf("LogicalVolume %s still has %s=%q after %s", name, k, v, after)
			}
		}
	}
}

// A PersistentVolume with the target's name bound to someone else stops the swap (steps.go:261): the
// claim is never put on it.
func TestMove_Swap_RefusesAPVBoundElsewhere(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	target := w.status().TargetPV
	fs := corev1.PersistentVolumeFilesystem
	squatter := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: target},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &fs,
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: w.ns, Name: "data", UID: "someone-else"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: names.Driver(), VolumeHandle: "elsewhere"}},
		}}
	must(t, env.Client.Create(ctx(t), squatter))
	lastErr := w.settle(r, agents{srcSum: sum, dstSum: sum}, 20)
	if lastErr == nil || !strings.Contains(lastErr.Error(), "exists and is not pre-bound to claim") {
		t.Fatalf("the swap's error = %v, want the PersistentVolume bound elsewhere named", lastErr)
	}
	if pvc := w.pvc(); pvc != nil && pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName == target {
		t.Fatal("the claim is Bound to a PersistentVolume bound to someone else")
	}
	if pv := w.pv(target); pv == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != "someone-else" || pv.Spec.CSI.VolumeHandle != "elsewhere" {
		t.Fatalf("the PersistentVolume bound elsewhere was changed: %+v", pv)
	}
	if st := w.status(); st.Phase == moveapi.PhaseAwaitingConfirmation {
		t.Fatalf("status %+v: the swap went on with the target's PV bound elsewhere", st)
	}
}

// Waiting for the confirmation says nothing of an abort nobody asked for (steps.go:300), and a refused
// abort takes the abort off the claim so it is not refused again on every pass (steps.go:301).
func TestMove_AwaitingConfirmation_AbortRefusedOnceAndOnlyWhenAsked(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 30))
	for range 2 {
		_, err := r.Reconcile(ctx(t), w.claim)
		must(t, err)
	}
	if st := w.status(); strings.Contains(st.Message, "abort refused") {
		t.Fatalf("status %+v: an abort nobody asked for was refused", st)
	}
	w.annotate(moveapi.AnnotationAbort, "true")
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if pvc := w.pvc(); pvc.Annotations[moveapi.AnnotationAbort] != "" {
		t.Errorf("the refused abort is still on the claim: %v", pvc.Annotations)
	}
}

// A claim recreated under the same name (another UID) that carries this move's confirmation does not
// confirm it (steps.go:299): only the claim the move made may.
func TestMove_Confirm_OnlyByTheClaimTheMoveMade(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 30))
	st := w.status()
	old := w.pvc()
	fresh := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: old.Name,
		Annotations: map[string]string{moveapi.AnnotationConfirm: st.ID}}, Spec: *old.Spec.DeepCopy()}
	base := old.DeepCopy()
	old.Finalizers = nil
	must(t, env.Client.Patch(ctx(t), old, client.MergeFrom(base)))
	must(t, env.Client.Delete(ctx(t), old))
	must(t, env.Client.Create(ctx(t), fresh))
	_, _ = r.Reconcile(ctx(t), w.claim)
	if got := w.pv(w.sourcePV); got == nil || got.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Fatal("another claim's confirmation released the source volume")
	}
}

// The swap tells both agents to stop: the target's receive-from is gone as well as the source's send-to,
// so no agent writes the target once the claim can use it (steps.go:248).
func TestMove_Swap_StopsBothAgents(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 30))
	target := w.status().TargetPV
	if w.lv(target) == nil {
		t.Fatal("the target LogicalVolume is gone after the swap")
	}
	noCopyInstructions(t, w, "the swap", w.sourceLV, target)
}

// A source LogicalVolume gone by the swap does not keep the target's agent receiving (steps.go:245: the
// target is stopped even when the source is not there to stop).
func TestMove_Swap_SourceGone_TargetStillStopped(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum, verified: "-"}, moveapi.PhaseSwapping, 20))
	target := w.status().TargetPV
	w.removeLV(w.sourceLV)
	_, _ = r.Reconcile(ctx(t), w.claim) // the swap cannot go on without its source; it must still stop the target
	noCopyInstructions(t, w, "a swap without its source", target)
}

// A source LogicalVolume that is gone does not crash an abort (steps.go:360), and a target that is gone
// before its PersistentVolume is made stops the swap naming it (steps.go:273).
func TestMove_VolumesGone_NamedNeverACrash(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	w.removeLV(w.sourceLV)
	w.annotate(moveapi.AnnotationAbort, "true")
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); st.Phase != moveapi.PhaseAborted {
		t.Fatalf("status %+v after aborting a move whose source is gone, want Aborted", st)
	}

	w, r = newMove(t)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum, verified: "-"}, moveapi.PhaseSwapping, 20))
	w.removeLV(w.status().TargetPV)
	lastErr := w.settle(r, agents{srcSum: sum, dstSum: sum}, 12)
	if lastErr == nil || !strings.Contains(lastErr.Error(), "is gone or has no volume ID") {
		t.Fatalf("the swap's error with the target gone = %v, want it named", lastErr)
	}
}

// A move that waits writes nothing: passes over a swap that waits for the source's verification patch no
// LogicalVolume (steps.go:417, setAnnotation writes only what changes).
func TestMove_Waiting_WritesNothing(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum, verified: "-"}, moveapi.PhaseSwapping, 20))
	target := w.status().TargetPV
	for range 3 { // settle: the claim is deleted and the verification asked for
		_, err := r.Reconcile(ctx(t), w.claim)
		must(t, err)
		w.kcm()
	}
	versions := func() []string {
		var out []string
		for _, name := range []string{w.sourceLV, target} {
			if lv := w.lv(name); lv != nil {
				out = append(out, name+"@"+lv.ResourceVersion)
			}
		}
		return out
	}
	before := versions()
	var patches atomic.Int32
	counting := w.reconciler(lvPatchCounter{Client: env.Client, n: &patches})
	for range 3 {
		_, err := counting.Reconcile(ctx(t), w.claim)
		must(t, err)
	}
	if after := versions(); strings.Join(after, " ") != strings.Join(before, " ") || patches.Load() != 0 {
		t.Errorf("waiting passes sent %d LogicalVolume patches and wrote %v -> %v", patches.Load(), before, after)
	}
}

// lvPatchCounter counts the patches of LogicalVolumes sent through it.
type lvPatchCounter struct {
	client.Client
	n *atomic.Int32
}

func (c lvPatchCounter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*topolvmv1.LogicalVolume); ok {
		c.n.Add(1)
	}
	return c.Client.Patch(ctx, obj, p, opts...)
}

// A verification request left on the source by an earlier move is replaced by this move's (steps.go:417:
// setAnnotation changes a value that differs), so the swap is not stuck waiting for a verification no
// agent will make.
func TestMove_Swap_ReplacesAnEarlierMovesVerifyRequest(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	w.setLVAnnotation(w.sourceLV, moveapi.AnnotationVerify, "an-earlier-move")
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 30))
}
