package move_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/move"
)

// The source is held from the move's start: nothing is copied while its agent says a pod still has it
// published, and the user reads where; once the agent holds it, the copy starts.
func TestMove_CopiesOnlyOnceTheSourceIsHeld(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	busy := agents{srcSum: sum, dstSum: sum, published: "/var/lib/kubelet/pods/0b0e/volumes/kubernetes.io~csi/pvc/mount"}
	if err := w.drive(r, busy, moveapi.PhaseCopying, 10); err == nil {
		t.Fatal("the copy started while the source was published")
	}
	st := w.status()
	src := w.lv(w.sourceLV)
	if src.Annotations[moveapi.AnnotationHold] != st.ID || src.Annotations[moveapi.AnnotationSendTo] != "" {
		t.Fatalf("source annotations %v: want the hold for move %s and no instruction to send", src.Annotations, st.ID)
	}
	if want := "waiting for the source volume to be free on " + w.nodeA + ": the volume is still published at " + busy.published; st.Phase != moveapi.PhaseCreatingTarget || !strings.Contains(st.Message, want) {
		t.Fatalf("status %+v, want CreatingTarget with %q", st, want)
	}
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 30))
	if got := w.lv(w.sourceLV).Annotations[moveapi.AnnotationHold]; got != st.ID {
		t.Fatalf("while the move awaits confirmation the source's hold is %q, want %q (the source stays unusable until confirmed)", got, st.ID)
	}
	w.annotate(moveapi.AnnotationConfirm, st.ID)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseDone, 3))
	for _, k := range []string{moveapi.AnnotationHold, moveapi.AnnotationVerify, moveapi.AnnotationSHA256, moveapi.AnnotationVerified} {
		if v, ok := w.lv(w.sourceLV).Annotations[k]; ok {
			t.Errorf("after the confirmation the source keeps %s=%q", k, v)
		}
	}
}

// The source is hashed again only once the claim is gone, and the claim comes back on the new volume only
// after that digest is the copy's.
func TestMove_SourceVerifiedAgainAfterTheClaimIsReleased(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	hashing := agents{srcSum: sum, dstSum: sum, verified: "-"} // "-": the source's agent is still reading
	for range 30 {
		_, err := r.Reconcile(ctx(t), w.claim)
		must(t, err)
		if w.lv(w.sourceLV).Annotations[moveapi.AnnotationVerify] != "" && w.pvc() != nil {
			t.Fatal("the source is verified while the claim still exists: a pod could write it after the verification")
		}
		hashing.run(w)
		w.kcm()
		w.checkInvariants()
	}
	if w.pvc() != nil {
		t.Fatal("the claim was created again before the source was verified")
	}
	if rec := w.pv(w.sourcePV).Annotations[move.AnnotationRecord]; !strings.Contains(rec, "reads the whole source again") {
		t.Fatalf("the record does not say what the move waits for: %s", rec)
	}
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 10))
	if st := w.status(); w.pvc().Spec.VolumeName != st.TargetPV {
		t.Fatalf("after the verification the claim names %q, want %s", w.pvc().Spec.VolumeName, st.TargetPV)
	}
}

// A source written after the copy was verified (by anything that got past the hold) is never swapped away:
// the claim goes back to its own volume, bound and with its reclaim policy, and the move says why.
func TestMove_SourceChangedAfterTheCopy_ClaimGoesBackToItsVolume(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	changed := strings.Repeat("a", 64)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum, verified: changed}, moveapi.PhaseAborted, 40))
	st := w.status()
	if want := "the source changed after it was copied (its SHA-256 is " + changed; !strings.Contains(st.Message, want) || !strings.Contains(st.Message, "goes back to its own volume on "+w.nodeA) {
		t.Fatalf("status %+v, want %q", st, want)
	}
	pvc := w.pvc()
	pv := w.pv(w.sourcePV)
	if pvc.Spec.VolumeName != w.sourcePV || pvc.Status.Phase != corev1.ClaimBound || pv.Spec.ClaimRef.UID != pvc.UID || pvc.Labels["app"] != "db" {
		t.Fatalf("claim %s (uid %s, %s) on %q; source PV claimRef uid %s: want the claim bound to its own volume again", pvc.Name, pvc.UID, pvc.Status.Phase, pvc.Spec.VolumeName, pv.Spec.ClaimRef.UID)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("the source PV's reclaim policy is %s, want Delete restored", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if lv := w.lv(st.TargetPV); lv != nil && lv.DeletionTimestamp.IsZero() {
		t.Error("the target LogicalVolume is kept")
	}
	if w.pv(st.TargetPV) != nil {
		t.Error("a PV was created for the target")
	}
	if a := w.lv(w.sourceLV).Annotations; a[moveapi.AnnotationHold] != "" || a[moveapi.AnnotationVerify] != "" {
		t.Errorf("the source stays held: %v", a)
	}
}

// The pod the source's agent refused during the move is named in the move's status.
func TestMove_StatusNamesThePodRefusedTheVolume(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	st := w.status()
	src := w.lv(w.sourceLV)
	base := src.DeepCopy()
	src.Annotations[moveapi.AnnotationRefusedPod] = st.ID + ":" + w.ns + "/web-0"
	must(t, env.Client.Patch(ctx(t), src, client.MergeFrom(base)))
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if want := "Pod " + w.ns + "/web-0 tried to use the claim on " + w.nodeA + " and was refused"; !strings.Contains(w.status().Message, want) {
		t.Fatalf("status %+v, want %q", w.status(), want)
	}
}

// A move aborted and asked for again to the same node is a new move (new ID, new target): it finishes, and
// nothing the agents reported for the aborted one counts for it.
func TestMove_AbortedThenRequestedAgain_IsANewMove(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{srcSum: sum}, moveapi.PhaseCopying, 10))
	must(t, w.drive(r, agents{srcSum: sum}, moveapi.PhaseCopying, 2)) // the source's digest is in
	first := w.status()
	if got := w.lv(w.sourceLV).Annotations[moveapi.AnnotationSHA256]; got != first.ID+":"+sum {
		t.Fatalf("source digest %q before the abort", got)
	}
	must(t, move.Abort(ctx(t), env.Client, w.claim))
	must(t, w.drive(r, agents{}, moveapi.PhaseAborted, 3))
	if a := w.lv(w.sourceLV).Annotations; a[moveapi.AnnotationSHA256] != "" || a[moveapi.AnnotationHold] != "" {
		t.Fatalf("after the abort the source keeps %v", a)
	}
	must(t, move.Request(ctx(t), env.Client, w.claim, w.nodeB))
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 40))
	if second := w.status(); second.ID == first.ID || second.TargetPV == first.TargetPV {
		t.Fatalf("the move asked for again has ID %s and target %s, as the aborted one", second.ID, second.TargetPV)
	}
}

// countingReader counts the lists that reach the API server.
type countingReader struct {
	client.Reader
	lists atomic.Int32
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	return c.Reader.List(ctx, list, opts...)
}

// A refused request costs nothing more however often the claim is looked at: no list of PVs, LogicalVolumes or
// pods until the user asks again.
func TestMove_RefusedRequest_NotTriedAgain(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w := newWorld(t)
	w.pod("web-0", "data")
	w.annotate(moveapi.AnnotationToNode, w.nodeB)
	reader := &countingReader{Reader: env.Client}
	r := &move.Reconciler{Client: env.Client, Reader: reader, Names: names}
	res, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); st.Phase != moveapi.PhaseRefused || res.Wait {
		t.Fatalf("status %+v, wait %v: want Refused and not looked at again", st, res.Wait)
	}
	reader.lists.Store(0)
	for range 20 {
		_, err := r.Reconcile(ctx(t), w.claim)
		must(t, err)
	}
	// Each look lists PVs once (the claim's move record; the cache's index in production): the preflight's
	// reads of pods, LogicalVolumes and the claim's PV are not repeated.
	if n := reader.lists.Load(); n > 20 {
		t.Fatalf("20 looks at a refused claim made %d lists, want at most one each (no preflight)", n)
	}
}

// Targets the claim's pods could not run on are refused with the reason: cordoned, tainted, outside the
// StorageClass's allowedTopologies.
func TestMove_Preflight_RefusesNodesPodsCannotRunOn(t *testing.T) {
	testenv.Require(t)
	cases := []struct {
		name  string
		setup func(w *world)
		want  string
	}{
		{"cordoned", func(w *world) {
			n := &corev1.Node{}
			must(w.t, env.Client.Get(ctx(w.t), client.ObjectKey{Name: w.nodeB}, n))
			n.Spec.Unschedulable = true
			must(w.t, env.Client.Update(ctx(w.t), n))
		}, "node %B is cordoned (unschedulable): the claim's pods could not start there (kubectl uncordon %B lifts it): choose another node"},
		{"tainted", func(w *world) {
			n := &corev1.Node{}
			must(w.t, env.Client.Get(ctx(w.t), client.ObjectKey{Name: w.nodeB}, n))
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
			must(w.t, env.Client.Update(ctx(w.t), n))
		}, "node %B has the taint dedicated=gpu:NoSchedule"},
		{"outside the class's topology", func(w *world) {
			sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms-ssd"}, Provisioner: names.Driver(),
				AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: "topology.kubernetes.io/zone", Values: []string{"zone-a"}}}}}}
			must(w.t, env.Client.Create(ctx(w.t), sc))
			w.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
		}, "node %B is outside the allowedTopologies of StorageClass lvms-ssd"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.setup(w)
			w.annotate(moveapi.AnnotationToNode, w.nodeB)
			_, err := w.reconciler(env.Client).Reconcile(ctx(t), w.claim)
			must(t, err)
			want := strings.ReplaceAll(tc.want, "%B", w.nodeB)
			if st := w.status(); st.Phase != moveapi.PhaseRefused || !strings.Contains(st.Message, want) {
				t.Fatalf("status %+v, want Refused with %q", st, want)
			}
			w.requireUntouched()
		})
	}
	// A node inside the topology is not refused for it.
	w := newWorld(t)
	n := &corev1.Node{}
	must(t, env.Client.Get(ctx(t), client.ObjectKey{Name: w.nodeB}, n))
	n.Labels = map[string]string{"topology.kubernetes.io/zone": "zone-a"}
	must(t, env.Client.Update(ctx(t), n))
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "lvms-ssd"}, Provisioner: names.Driver(),
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: "topology.kubernetes.io/zone", Values: []string{"zone-a"}}}}}}
	must(t, env.Client.Create(ctx(t), sc))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	w.annotate(moveapi.AnnotationToNode, w.nodeB)
	must(t, w.drive(w.reconciler(env.Client), agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 30))
}

// While the admission policies that confine the node agents and move requests are not in place, no move
// starts, and the status says what is missing.
func TestMove_RefusedWhileTheAdmissionPoliciesAreMissing(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w := newWorld(t)
	w.annotate(moveapi.AnnotationToNode, w.nodeB)
	why := "the admission policy lvms-node-agent-own-node is missing and the operator cannot restore it: apply deploy/nodeagent/admissionpolicy.yaml"
	r := &move.Reconciler{Client: env.Client, Reader: env.Client, Names: names, Admission: func() string { return why }}
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); st.Phase != moveapi.PhaseRefused || st.Message != "volume moves are off in this cluster: "+why {
		t.Fatalf("status %+v, want Refused saying why moves are off", st)
	}
	w.requireUntouched()
}
