package move_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/move"
)

// The cases reconciler.go's mutation run (e2e/tools/mutate-survivors.txt) found no test telling apart:
// each test names the line it covers (as of 2862909).

// A claim that asks for no move, or is gone, is left alone: no status, no record (reconciler.go:62).
func TestMove_ClaimWithoutRequest_LeftAlone(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w := newWorld(t)
	r := w.reconciler(env.Client)
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if _, ok := w.pvc().Annotations[moveapi.AnnotationStatus]; ok {
		t.Fatalf("a claim that asked for no move shows a move status: %q", w.pvc().Annotations[moveapi.AnnotationStatus])
	}
	w.requireUntouched()
	_, err = r.Reconcile(ctx(t), types.NamespacedName{Namespace: w.ns, Name: "gone"})
	must(t, err)
}

// A refusal names the source volume, the first pass of a move shows it on the claim at once
// (reconciler.go:244, 261), and a refused request changed by hand to another node is tried, not taken for
// the refused one (reconciler.go:94).
func TestMove_RefusedRequestChangedByHand_IsTriedAndShownAtOnce(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w := newWorld(t)
	r := w.reconciler(env.Client)
	w.annotate(moveapi.AnnotationToNode, w.nodeA)
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); st.Phase != moveapi.PhaseRefused || st.SourcePV != w.sourcePV {
		t.Fatalf("status %+v, want Refused naming PersistentVolume %s", st, w.sourcePV)
	}
	w.annotate(moveapi.AnnotationToNode, w.nodeB) // kubectl annotate --overwrite: the refusal stays on the claim
	_, err = r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); st.Phase != moveapi.PhaseCreatingTarget || st.TargetNode != w.nodeB {
		t.Fatalf("status after one pass %+v, want CreatingTarget to %s", st, w.nodeB)
	}
}

// An abort annotation naming another move (an earlier one's ID left on the claim) does not abort this one
// (reconciler.go:100).
func TestMove_AbortNamingAnotherMove_Ignored(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	w.annotate(moveapi.AnnotationAbort, "0123456789abcdef")
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); st.Phase != moveapi.PhaseCopying {
		t.Fatalf("status %+v after an abort for another move, want still Copying", st)
	}
}

// Claims whose volume is not an LVMS one, or that have none yet, are refused with the reason, never a
// crash (reconciler.go:158, 222, 244).
func TestMove_ClaimWithoutAnLVMSVolume_RefusedNamingWhy(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	ns := env.Namespace(t)
	node := ns + "-b"
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	must(t, env.Client.Create(ctx(t), n))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	claim := func(name, volume string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{moveapi.AnnotationToNode: node}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: volume,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		must(t, env.Client.Create(ctx(t), pvc))
		return pvc
	}
	pending := claim("pending", "")
	hostPV := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "host-" + ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/data"}}}}
	hosted := claim("hosted", hostPV.Name)
	hostPV.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: hosted.Name, UID: hosted.UID}
	must(t, env.Client.Create(ctx(t), hostPV))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), hostPV) })
	hosted.Status.Phase = corev1.ClaimBound
	must(t, env.Client.Status().Update(ctx(t), hosted))

	r := &move.Reconciler{Client: env.Client, Reader: env.Client, Names: names}
	for pvc, want := range map[*corev1.PersistentVolumeClaim]string{
		pending: "claim " + ns + "/pending is not Bound",
		hosted:  "PersistentVolume " + hostPV.Name + " of claim " + ns + "/hosted is not an LVMS volume",
	} {
		key := types.NamespacedName{Namespace: ns, Name: pvc.Name}
		_, err := r.Reconcile(ctx(t), key)
		must(t, err)
		got := &corev1.PersistentVolumeClaim{}
		must(t, env.Client.Get(ctx(t), key, got))
		st, _, err := moveapi.ParseStatus(got)
		must(t, err)
		if st.Phase != moveapi.PhaseRefused || !strings.Contains(st.Message, want) {
			t.Errorf("claim %s: status %+v, want Refused with %q", pvc.Name, st, want)
		}
	}
}

// A source PersistentVolume carrying a record that is not one is never written over: the pass fails naming
// the volume and changes nothing (reconciler.go:251).
func TestMove_MalformedRecordOnTheSource_NotOverwritten(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	pv := w.pv(w.sourcePV)
	pv.Annotations = map[string]string{move.AnnotationRecord: "{not a record"}
	must(t, env.Client.Update(ctx(t), pv))
	_, err := r.Reconcile(ctx(t), w.claim)
	if err == nil || !strings.Contains(err.Error(), w.sourcePV) {
		t.Fatalf("a pass over a malformed record: error %v, want one naming %s", err, w.sourcePV)
	}
	if got := w.pv(w.sourcePV); got.Annotations[move.AnnotationRecord] != "{not a record" || got.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Fatalf("the malformed record was written over: %q, policy %s", got.Annotations[move.AnnotationRecord], got.Spec.PersistentVolumeReclaimPolicy)
	}
}

// The claim keeps the annotations that are not the move's (reconciler.go:288).
func TestMove_ClaimKeepsItsOtherAnnotations(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	w.annotate("example.com/team", "storage")
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	if a := w.pvc().Annotations; a["example.com/team"] != "storage" || a[moveapi.AnnotationToNode] != w.nodeB {
		t.Fatalf("the claim's annotations during the move: %v, want its own kept", a)
	}
}

// The copy's progress, as the receiving agent reports it on the target, is shown on the claim
// (reconciler.go:310).
func TestMove_StatusShowsTheCopysProgress(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	w.setLVAnnotation(w.status().TargetPV, moveapi.AnnotationProgress, "3/16")
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); st.Progress != "3/16" {
		t.Fatalf("status %+v, want progress 3/16", st)
	}
}

// A source LogicalVolume gone during the copy stops the move naming it, never a crash (reconciler.go:313).
func TestMove_Copying_SourceGone_Named(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10))
	w.removeLV(w.sourceLV)
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if st := w.status(); !strings.Contains(st.Message, "disappeared during the copy") {
		t.Fatalf("status %+v, want the move stopped naming the volume gone", st)
	}
}
