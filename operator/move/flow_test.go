package move_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/move"
	"github.com/lvms-dev/lvms/operator/optest"
)

const sum = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"

func TestMove_SwapsTheClaimAndKeepsTheSourceUntilConfirmed(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 30))

	st := w.status()
	pvc := w.pvc()
	if pvc.UID == w.sourceClaimUID || pvc.Spec.VolumeName != st.TargetPV || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim after the swap: uid %s (was %s), volume %q, phase %s; want a new claim bound to %s", pvc.UID, w.sourceClaimUID, pvc.Spec.VolumeName, pvc.Status.Phase, st.TargetPV)
	}
	if pvc.Labels["app"] != "db" || pvc.Annotations[moveapi.AnnotationToNode] != "" {
		t.Errorf("recreated claim: labels %v, to-node %q; want the labels kept and the request gone", pvc.Labels, pvc.Annotations[moveapi.AnnotationToNode])
	}
	np := w.pv(st.TargetPV)
	lv := w.lv(st.TargetPV)
	if np == nil || lv == nil {
		t.Fatalf("new PV %v, target LogicalVolume %v", np, lv)
	}
	if np.Spec.ClaimRef.UID != pvc.UID || np.Spec.CSI.VolumeHandle != lv.Status.VolumeID || lv.Spec.NodeName != w.nodeB ||
		np.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != w.nodeB ||
		np.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || lv.Spec.DeviceClass != "ssd" || lv.Spec.Size.String() != "1Gi" {
		t.Errorf("new PV %s: claimRef uid %s, handle %s, policy %s; target LV node %s class %s size %s", np.Name, np.Spec.ClaimRef.UID,
			np.Spec.CSI.VolumeHandle, np.Spec.PersistentVolumeReclaimPolicy, lv.Spec.NodeName, lv.Spec.DeviceClass, lv.Spec.Size.String())
	}
	if st.SHA256 != sum || st.SourcePV != w.sourcePV {
		t.Errorf("status %+v", st)
	}

	// Not confirmed (or confirmed with another move's ID): the source stays, Retain.
	w.annotate(moveapi.AnnotationConfirm, "0000000000000000")
	for range 3 {
		_, err := r.Reconcile(ctx(t), w.claim)
		must(t, err)
	}
	if pv := w.pv(w.sourcePV); pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || pv.Spec.ClaimRef.UID != w.sourceClaimUID {
		t.Fatalf("before confirmation the source PV has policy %s and claimRef uid %s; want Retain and the old claim", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.ClaimRef.UID)
	}
	if w.lv(w.sourceLV) == nil {
		t.Fatal("the source LogicalVolume is gone before confirmation")
	}

	w.annotate(moveapi.AnnotationConfirm, st.ID)
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if pv := w.pv(w.sourcePV); pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Fatalf("after confirmation the source PV has policy %s, want Delete restored (the deleter releases it)", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if got := w.status(); got.Phase != moveapi.PhaseDone || !strings.Contains(got.Message, "released") {
		t.Errorf("status after confirmation %+v", got)
	}
	if _, ok := w.pvc().Annotations[moveapi.AnnotationConfirm]; ok {
		t.Error("the confirmation annotation stayed on the claim")
	}
}

// pod makes a running pod in the world's namespace that mounts claim, owned by a ReplicaSet.
func (w *world) pod(name, claim string) *corev1.Pod {
	w.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d9c", UID: "0b0e7c1e-0000-4000-8000-000000000001", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
	must(w.t, env.Client.Create(ctx(w.t), p))
	return p
}

// requireUntouched fails unless the source PV carries no move and keeps its policy, and no target volume
// was made.
func (w *world) requireUntouched() {
	w.t.Helper()
	pv := w.pv(w.sourcePV)
	if _, ok := pv.Annotations[move.AnnotationRecord]; ok || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		w.t.Fatalf("a refused move changed the source PV: policy %s, record %q", pv.Spec.PersistentVolumeReclaimPolicy, pv.Annotations[move.AnnotationRecord])
	}
	list := &topolvmv1.LogicalVolumeList{}
	must(w.t, env.Client.List(ctx(w.t), list))
	for _, lv := range list.Items {
		if lv.Spec.NodeName == w.nodeB {
			w.t.Fatalf("a refused move created LogicalVolume %s on %s", lv.Name, w.nodeB)
		}
	}
	if pvc := w.pvc(); pvc.UID != w.sourceClaimUID {
		w.t.Fatal("a refused move replaced the claim")
	}
}

func TestMove_InUse_RefusedNamingTheWorkload_ThenProceedsOnceScaledDown(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w := newWorld(t)
	p := w.pod("web-5d9c-x7k2p", "data")
	w.pod("other-1", "not-this-claim")
	w.annotate(moveapi.AnnotationToNode, w.nodeB)
	r := w.reconciler(env.Client)
	for range 2 {
		res, err := r.Reconcile(ctx(t), w.claim)
		must(t, err)
		if res.Wait {
			t.Error("a refused request is looked at again by itself: refusals are final until the user asks again")
		}
	}
	st := w.status()
	want := "claim " + w.ns + "/data is in use by Pod web-5d9c-x7k2p (of ReplicaSet web-5d9c): scale what runs them to zero"
	if st.Phase != "Refused" || !strings.Contains(st.Message, want) || !strings.Contains(st.Message, "LVMS never scales your workloads") || strings.Contains(st.Message, "other-1") {
		t.Fatalf("status %+v, want Refused with %q", st, want)
	}
	w.requireUntouched()
	must(t, env.Client.Delete(ctx(t), p))
	// Still refused: nothing retries by itself; the user asks again (lvms move pvc), as the message says.
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseRefused, 1))
	if w.pv(w.sourcePV).Annotations[move.AnnotationRecord] != "" {
		t.Fatal("a refused request started once the pods were gone, without being asked again")
	}
	must(t, move.Request(ctx(t), env.Client, w.claim, w.nodeB))
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 30))
}

func TestMove_Preflight_RefusesAndTouchesNothing(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	cases := []struct {
		name  string
		setup func(w *world) (toNode string)
		want  string
	}{
		{"the node the volume is on", func(w *world) string { return w.nodeA }, "is on node %A already: name another node"},
		{"a node that does not exist", func(w *world) string { return w.ns + "-nowhere" }, "node %NS-nowhere does not exist"},
		{"a node name that is not one", func(w *world) string { return "../../etc" }, `target node "../../etc" is not a node name`},
		{"a node without the device class", func(w *world) string {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: w.ns + "-c"}}
			must(w.t, env.Client.Create(ctx(w.t), n))
			w.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
			optest.Ready(w.t, env.Client, n.Name)
			return n.Name
		}, `node %NS-c has no device class "ssd"`},
		{"a node with too little free space", func(w *world) string {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: w.ns + "-d", Annotations: map[string]string{names.CapacityAnnotation("ssd"): "536870912"}}}
			must(w.t, env.Client.Create(ctx(w.t), n))
			w.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
			optest.Ready(w.t, env.Client, n.Name)
			return n.Name
		}, `node %NS-d has 512Mi free in device class "ssd", the volume needs 1Gi`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.annotate(moveapi.AnnotationToNode, tc.setup(w))
			_, err := w.reconciler(env.Client).Reconcile(ctx(t), w.claim)
			must(t, err)
			want := strings.NewReplacer("%A", w.nodeA, "%NS", w.ns).Replace(tc.want)
			if st := w.status(); st.Phase != "Refused" || !strings.Contains(st.Message, want) {
				t.Fatalf("status %+v, want Refused with %q", st, want)
			}
			w.requireUntouched()
		})
	}
}

func TestMove_ClaimNamingAnotherNamespacesVolume_IsRefused(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	victim := newWorld(t)
	ns := env.Namespace(t)
	sc := "lvms-ssd"
	// A claim in the attacker's namespace whose spec.volumeName names the victim's PV.
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grab", Annotations: map[string]string{moveapi.AnnotationToNode: victim.nodeB}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:  victim.pvc().Spec.Resources,
			VolumeName: victim.sourcePV}}
	must(t, env.Client.Create(ctx(t), pvc))
	pvc.Status.Phase = corev1.ClaimBound
	must(t, env.Client.Status().Update(ctx(t), pvc))
	_, err := victim.reconciler(env.Client).Reconcile(ctx(t), types.NamespacedName{Namespace: ns, Name: "grab"})
	must(t, err)
	must(t, env.Client.Get(ctx(t), client.ObjectKeyFromObject(pvc), pvc))
	st, _, err := moveapi.ParseStatus(pvc)
	must(t, err)
	if want := "PersistentVolume " + victim.sourcePV + " is not bound to claim " + ns + "/grab"; st.Phase != "Refused" || !strings.Contains(st.Message, want) {
		t.Fatalf("status %+v, want Refused with %q", st, want)
	}
	victim.requireUntouched()
}

func TestMove_AbortBeforeSwap_ReturnsToTheStart(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 10)) // the agents never finish
	target := w.status().TargetPV
	if w.lv(target) == nil || w.lv(w.sourceLV).Annotations[moveapi.AnnotationSendTo] == "" {
		t.Fatal("no copy under way to abort")
	}
	w.annotate(moveapi.AnnotationAbort, "true")
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)

	if lv := w.lv(target); lv != nil && lv.DeletionTimestamp.IsZero() {
		t.Error("the target LogicalVolume is not deleted after an abort")
	}
	src := w.lv(w.sourceLV)
	if src == nil || src.Annotations[moveapi.AnnotationSendTo] != "" {
		t.Fatalf("source LogicalVolume after the abort: %v", src)
	}
	pv := w.pv(w.sourcePV)
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("the source PV's reclaim policy is %s after the abort, want Delete restored", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	pvc := w.pvc()
	if pvc.UID != w.sourceClaimUID || pvc.Spec.VolumeName != w.sourcePV || pvc.Annotations[moveapi.AnnotationToNode] != "" || pvc.Annotations[moveapi.AnnotationAbort] != "" {
		t.Errorf("claim after the abort: uid %s, volume %s, annotations %v", pvc.UID, pvc.Spec.VolumeName, pvc.Annotations)
	}
	if st := w.status(); st.Phase != moveapi.PhaseAborted {
		t.Errorf("status %+v", st)
	}
	// Nothing happens afterwards.
	_, err = r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if w.pvc().UID != w.sourceClaimUID {
		t.Fatal("the claim was replaced after the abort")
	}
}

func TestMove_AbortAfterSwap_IsRefusedAndChangesNothing(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 30))
	before := w.pvc()
	w.annotate(moveapi.AnnotationAbort, "true")
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	after := w.pvc()
	if st := w.status(); st.Phase != moveapi.PhaseAwaitingConfirmation || !strings.Contains(st.Message, "abort refused: the claim already uses the new volume") {
		t.Fatalf("status %+v", st)
	}
	if after.UID != before.UID || w.lv(after.Spec.VolumeName) == nil || w.pv(w.sourcePV).Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Fatal("a refused abort changed the claim, the target volume or the source PV")
	}
}

func TestMove_ChecksumsDiffer_NeverSwaps(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	err := w.drive(r, agents{srcSum: sum, dstSum: strings.Repeat("0", 64)}, moveapi.PhaseSwapping, 20)
	if err == nil {
		t.Fatal("the move reached the swap with different checksums")
	}
	if st := w.status(); st.Phase != moveapi.PhaseCopying || !strings.Contains(st.Message, "the checksums differ") {
		t.Fatalf("status %+v", st)
	}
	if pvc := w.pvc(); pvc.UID != w.sourceClaimUID || pvc.Spec.VolumeName != w.sourcePV {
		t.Fatal("the claim was swapped although the checksums differ")
	}
}

// The target agent is told to receive only once its volume exists (else its first attempt fails to open
// it and the user reads that failure for the whole copy), and an error left from an earlier attempt
// neither shows nor stalls the move once both digests are in.
func TestMove_CopyErrors_ShownWhileCopyingOnly(t *testing.T) {
	testenv.Require(t)
	t.Parallel()
	w, r := newMove(t)
	for range 3 {
		_, err := r.Reconcile(ctx(t), w.claim)
		must(t, err)
	}
	st := w.status()
	if st.Phase != moveapi.PhaseCreatingTarget {
		t.Fatalf("status %+v, want CreatingTarget while no agent made the target volume", st)
	}
	if to := w.lv(st.TargetPV).Annotations[moveapi.AnnotationReceiveFrom]; to != "" {
		t.Fatalf("the target LogicalVolume says receive-from %q before its volume exists", to)
	}
	must(t, w.drive(r, agents{}, moveapi.PhaseCopying, 5))
	lv := w.lv(st.TargetPV)
	if lv.Annotations[moveapi.AnnotationReceiveFrom] != w.nodeA+"/"+w.sourceLV {
		t.Fatalf("target annotations %v, want receive-from %s/%s once it has a volume", lv.Annotations, w.nodeA, w.sourceLV)
	}
	base := lv.DeepCopy()
	lv.Annotations[moveapi.AnnotationCopyError] = st.ID + ":read frame: EOF"
	must(t, env.Client.Patch(ctx(t), lv, client.MergeFrom(base)))
	_, err := r.Reconcile(ctx(t), w.claim)
	must(t, err)
	if got := w.status(); !strings.Contains(got.Message, "retried from its last verified chunk: read frame: EOF") {
		t.Fatalf("while copying, status %+v; want the agent's error", got)
	}
	must(t, w.drive(r, agents{srcSum: sum, dstSum: sum}, moveapi.PhaseAwaitingConfirmation, 20))
}
