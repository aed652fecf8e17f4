package move

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// createTarget creates the target LogicalVolume (same class, size and options as the source) on the
// target node and waits until its agent made the LV.
func (r *Reconciler) createTarget(ctx context.Context, pv *corev1.PersistentVolume, rec *Record) (Result, error) {
	src, err := r.logicalVolume(ctx, rec.SourceVolume)
	if err != nil {
		return Result{}, err
	}
	if src == nil {
		return r.fail(ctx, pv, rec, fmt.Sprintf("the source LogicalVolume %s is gone: abort the move", rec.SourceVolume))
	}
	// The source is held before anything else: from the agent's answer on, no pod may publish it.
	if err := r.setAnnotation(ctx, src, moveapi.AnnotationHold, rec.ID); err != nil {
		return Result{}, err
	}
	lv, err := r.logicalVolume(ctx, rec.TargetVolume)
	if err != nil {
		return Result{}, err
	}
	if lv == nil {
		lv = &topolvmv1.LogicalVolume{
			ObjectMeta: metav1.ObjectMeta{Name: rec.TargetVolume, Annotations: map[string]string{moveapi.AnnotationID: rec.ID}},
			Spec: topolvmv1.LogicalVolumeSpec{Name: rec.TargetVolume, NodeName: rec.TargetNode, Size: src.Spec.Size,
				DeviceClass: src.Spec.DeviceClass, LvcreateOptionClass: src.Spec.LvcreateOptionClass},
		}
		if err := r.Client.Create(ctx, lv); err != nil && !apierrors.IsAlreadyExists(err) {
			return Result{}, fmt.Errorf("create the target LogicalVolume %s: %w", rec.TargetVolume, err)
		}
		return wait, nil
	}
	if lv.Annotations[moveapi.AnnotationID] != rec.ID || !lv.DeletionTimestamp.IsZero() {
		return wait, r.note(ctx, pv, rec, fmt.Sprintf("LogicalVolume %s exists and is not this move's: delete it, or abort the move", lv.Name))
	}
	if lv.Status.Code != 0 {
		return wait, r.note(ctx, pv, rec, fmt.Sprintf("node %s could not create the target volume: %s", rec.TargetNode, lv.Status.Message))
	}
	if lv.Status.VolumeID == "" {
		return wait, r.note(ctx, pv, rec, fmt.Sprintf("waiting for the LVMS node agent on %s to create the target volume", rec.TargetNode))
	}
	if msg := holdWait(src, rec); msg != "" {
		return wait, r.note(ctx, pv, rec, msg)
	}
	// The volume exists and the source is held: tell the target agent whom to receive from (not earlier: it
	// would try to open a volume that is not there yet) and the source agent where to send, then advance.
	if err := r.setAnnotation(ctx, lv, moveapi.AnnotationReceiveFrom, rec.SourceNode+"/"+rec.SourceVolume); err != nil {
		return Result{}, err
	}
	if err := r.setAnnotation(ctx, src, moveapi.AnnotationSendTo, rec.TargetNode+"/"+rec.TargetVolume+"/"+rec.ID); err != nil {
		return Result{}, err
	}
	rec.Phase, rec.Message = moveapi.PhaseCopying, ""
	return Result{}, r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain)
}

// copying waits for both agents' digests; equal digests advance to the swap.
func (r *Reconciler) copying(ctx context.Context, pv *corev1.PersistentVolume, rec *Record) (Result, error) {
	src, err := r.logicalVolume(ctx, rec.SourceVolume)
	if err != nil {
		return Result{}, err
	}
	dst, err := r.logicalVolume(ctx, rec.TargetVolume)
	if err != nil {
		return Result{}, err
	}
	if src == nil || dst == nil {
		return r.fail(ctx, pv, rec, fmt.Sprintf("LogicalVolume %s or %s disappeared during the copy: abort the move", rec.SourceVolume, rec.TargetVolume))
	}
	// The digests first: once both agents reported one, an error an agent left from an earlier attempt
	// does not matter.
	srcSum, dstSum := agentReport(src, moveapi.AnnotationSHA256, rec.ID), agentReport(dst, moveapi.AnnotationSHA256, rec.ID)
	if msg := holdWait(src, rec); msg != "" {
		return wait, r.note(ctx, pv, rec, msg)
	}
	if srcSum == "" || dstSum == "" {
		if msg := agentReport(dst, moveapi.AnnotationCopyError, rec.ID) + agentReport(src, moveapi.AnnotationCopyError, rec.ID); msg != "" {
			return wait, r.note(ctx, pv, rec, "the copy failed and is retried from its last verified chunk: "+msg)
		}
		return wait, r.note(ctx, pv, rec, "copying")
	}
	if srcSum != dstSum {
		return r.fail(ctx, pv, rec, fmt.Sprintf("the checksums differ (source %s, target %s): the claim was not swapped; abort the move and start again", srcSum, dstSum))
	}
	rec.Phase, rec.SHA256, rec.Message = moveapi.PhaseSwapping, srcSum, ""
	return Result{}, r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain)
}

// swap replaces the claim by one bound to the new PV. Order: the agents are told to stop (no agent
// writes the target once a claim can use it); no pod may use the claim and the source is held; the claim
// is saved in the Record; the claim is deleted (precondition: its UID); once it is gone (released: no pod
// can use it any more), the source's agent hashes the whole source again and only when that digest is
// the copy's does the claim come back, naming the new PV, and then the new PV is created pre-bound to the
// new claim's UID. A source that changed after the copy was verified sends the claim back to its own
// volume instead (restore). The source PV keeps the old UID in its claimRef, so at no point do two PVs
// claim the claim.
func (r *Reconciler) swap(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, rec *Record) (Result, error) {
	if err := r.stopAgents(ctx, rec); err != nil {
		return Result{}, err
	}
	key := types.NamespacedName{Namespace: rec.Namespace, Name: rec.Claim}
	switch {
	case pvc != nil && pvc.UID == rec.ClaimUID:
		if !pvc.DeletionTimestamp.IsZero() {
			return wait, r.note(ctx, pv, rec, "waiting for the claim to be deleted (kubernetes.io/pvc-protection keeps it while a pod uses it)")
		}
		users, err := r.users(ctx, pvc.Namespace, pvc.Name)
		if err != nil {
			return Result{}, err
		}
		if msg := usersMessage(key.String(), users); msg != "" {
			return wait, r.note(ctx, pv, rec, "the copy is verified, the swap waits: "+msg)
		}
		src, err := r.logicalVolume(ctx, rec.SourceVolume)
		if err != nil {
			return Result{}, err
		}
		if src == nil {
			return r.fail(ctx, pv, rec, fmt.Sprintf("the source LogicalVolume %s is gone: abort the move", rec.SourceVolume))
		}
		if msg := holdWait(src, rec); msg != "" {
			return wait, r.note(ctx, pv, rec, msg)
		}
		if rec.Saved == nil {
			rec.Saved = saveClaim(pvc)
			return Result{}, r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain)
		}
		uid := pvc.UID
		if err := r.Client.Delete(ctx, pvc, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("delete claim %s for the swap: %w", key, err)
		}
		return wait, nil
	case pvc == nil:
		if rec.Saved == nil {
			return r.fail(ctx, pv, rec, fmt.Sprintf("claim %s was deleted before the move saved it: the data is on PersistentVolume %s (kept, Retain)", key, pv.Name))
		}
		volume := rec.TargetVolume
		if rec.Restore {
			volume = pv.Name
		} else if rec.Verified == "" {
			return r.verifySource(ctx, pv, rec)
		}
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: rec.Claim, Labels: rec.Saved.Labels, Annotations: maps.Clone(rec.Saved.Annotations)},
			Spec:       *rec.Saved.Spec.DeepCopy(),
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[moveapi.AnnotationStatus] = rec.status(pv.Name).Encode()
		c.Spec.VolumeName = volume
		if err := r.Client.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
			return Result{}, fmt.Errorf("create claim %s on %s volume: %w", key, map[bool]string{true: "its own", false: "the new"}[rec.Restore], err)
		}
		return Result{}, nil
	case rec.Restore && pvc.Spec.VolumeName == pv.Name:
		return r.restore(ctx, pvc, pv, rec)
	case pvc.Spec.VolumeName != rec.TargetVolume || rec.Restore:
		return r.fail(ctx, pv, rec, fmt.Sprintf("claim %s was created again by someone else, on volume %q: the moved data is on LogicalVolume %s, the source on PersistentVolume %s (kept, Retain)",
			key, pvc.Spec.VolumeName, rec.TargetVolume, pv.Name))
	}
	// The claim exists again and names the new PV.
	if rec.NewClaimUID != pvc.UID {
		rec.NewClaimUID = pvc.UID
		return Result{}, r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain)
	}
	if err := r.ensureNewPV(ctx, pv, pvc, rec); err != nil {
		return Result{}, err
	}
	rec.Phase, rec.Message = moveapi.PhaseAwaitingConfirmation, ""
	return Result{}, r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain)
}

// verifySource asks the source's agent, once the claim is gone, to hash the whole held source again, and
// compares that digest with the copy's (the target's, as its agent read it back). Equal: the swap goes on
// (rec.Verified). Different: something wrote the source after the copy, and the claim goes back to it.
func (r *Reconciler) verifySource(ctx context.Context, pv *corev1.PersistentVolume, rec *Record) (Result, error) {
	src, err := r.logicalVolume(ctx, rec.SourceVolume)
	if err != nil {
		return Result{}, err
	}
	if src == nil {
		return r.fail(ctx, pv, rec, fmt.Sprintf("the source LogicalVolume %s is gone: the moved data is on LogicalVolume %s; create the claim on it by hand", rec.SourceVolume, rec.TargetVolume))
	}
	if err := r.setAnnotation(ctx, src, moveapi.AnnotationVerify, rec.ID); err != nil {
		return Result{}, err
	}
	got := agentReport(src, moveapi.AnnotationVerified, rec.ID)
	switch {
	case got == "":
		return wait, r.note(ctx, pv, rec, fmt.Sprintf("the claim is released: the LVMS node agent on %s reads the whole source again to verify it is what was copied", rec.SourceNode))
	case strings.HasPrefix(got, "error: "):
		return wait, r.note(ctx, pv, rec, fmt.Sprintf("verifying the source on %s failed and is retried: %s", rec.SourceNode, strings.TrimPrefix(got, "error: ")))
	case got != rec.SHA256:
		rec.Restore = true
		rec.Message = fmt.Sprintf("the source changed after it was copied (its SHA-256 is %s now, %s was copied): the move stops and the claim goes back to its own volume on %s, where every write is; move it again",
			got, rec.SHA256, rec.SourceNode)
		return Result{}, r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain)
	}
	rec.Verified, rec.Message = got, ""
	return Result{}, r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain)
}

// restore ends a move whose source changed after the copy: the claim was created again on the source PV,
// which is bound to it (its claimRef takes the new claim's UID) with its reclaim policy restored; the
// target volume is deleted and the source released. The move ends Aborted, saying why.
func (r *Reconciler) restore(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, rec *Record) (Result, error) {
	if err := r.deleteTarget(ctx, rec); err != nil {
		return Result{}, err
	}
	if err := r.releaseSource(ctx, rec); err != nil {
		return Result{}, err
	}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
	rec.Phase, rec.NewClaimUID = moveapi.PhaseAborted, pvc.UID
	if err := r.writeRecord(ctx, pv, rec, rec.ReclaimPolicy); err != nil {
		return Result{}, err
	}
	return Result{}, r.patchClaim(ctx, pvc, rec.status(pv.Name), nil)
}

// stopAgents removes the copy instructions from both LogicalVolumes.
func (r *Reconciler) stopAgents(ctx context.Context, rec *Record) error {
	for _, name := range []string{rec.SourceVolume, rec.TargetVolume} {
		lv, err := r.logicalVolume(ctx, name)
		if err != nil {
			return err
		}
		if lv == nil {
			continue
		}
		for _, k := range []string{moveapi.AnnotationSendTo, moveapi.AnnotationReceiveFrom} {
			if err := r.setAnnotation(ctx, lv, k, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureNewPV creates the PV of the target volume, pre-bound to the new claim.
func (r *Reconciler) ensureNewPV(ctx context.Context, old *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim, rec *Record) error {
	existing := &corev1.PersistentVolume{}
	err := r.Reader.Get(ctx, types.NamespacedName{Name: rec.TargetVolume}, existing)
	if err == nil {
		if ref := existing.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID {
			return fmt.Errorf("PersistentVolume %s exists and is not pre-bound to claim %s/%s (uid %s): remove it by hand", existing.Name, pvc.Namespace, pvc.Name, pvc.UID)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get PersistentVolume %s: %w", rec.TargetVolume, err)
	}
	lv, err := r.logicalVolume(ctx, rec.TargetVolume)
	if err != nil {
		return err
	}
	if lv == nil || lv.Status.VolumeID == "" {
		return fmt.Errorf("the target LogicalVolume %s is gone or has no volume ID", rec.TargetVolume)
	}
	spec := *old.Spec.DeepCopy()
	spec.PersistentVolumeReclaimPolicy = rec.ReclaimPolicy
	spec.CSI.VolumeHandle = lv.Status.VolumeID
	spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
	spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: r.Names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{rec.TargetNode}}},
	}}}}
	np := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: rec.TargetVolume, Annotations: map[string]string{
			"pv.kubernetes.io/provisioned-by": r.Names.Driver(),
			AnnotationMovedFrom:               old.Name,
		}},
		Spec: spec,
	}
	if err := r.Client.Create(ctx, np); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create PersistentVolume %s: %w", np.Name, err)
	}
	return nil
}

// awaitConfirmation keeps the source until the claim carries the confirmation; then the source PV's
// reclaim policy is restored (Delete releases it the normal way).
func (r *Reconciler) awaitConfirmation(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, rec *Record) (Result, error) {
	if pvc == nil || pvc.UID != rec.NewClaimUID || pvc.Annotations[moveapi.AnnotationConfirm] != rec.ID {
		if pvc != nil && pvc.UID == rec.NewClaimUID && aborting(pvc, rec) {
			if err := r.note(ctx, pv, rec, "abort refused: the claim already uses the new volume; to go back, move it again (the source is kept until you confirm)"); err != nil {
				return Result{}, err
			}
			return Result{}, r.patchClaim(ctx, pvc, rec.status(pv.Name), []string{moveapi.AnnotationAbort})
		}
		return Result{}, nil
	}
	rec.Phase, rec.Message = moveapi.PhaseDone, "confirmed: the source volume is released (its reclaim policy "+string(rec.ReclaimPolicy)+" is restored)"
	if rec.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		rec.Message = "confirmed: the source PersistentVolume " + pv.Name + " keeps its reclaim policy " + string(rec.ReclaimPolicy) + ": delete it yourself when you no longer need it"
	}
	if err := r.releaseSource(ctx, rec); err != nil {
		return Result{}, err
	}
	if err := r.writeRecord(ctx, pv, rec, rec.ReclaimPolicy); err != nil {
		return Result{}, err
	}
	return Result{}, r.patchClaim(ctx, pvc, rec.status(pv.Name), []string{moveapi.AnnotationConfirm})
}

// abort returns to the start: the copy instructions are removed, the target LogicalVolume (only the one
// this move made) is deleted, the source is released and the source PV's reclaim policy is restored. Only
// before the swap deleted the claim.
func (r *Reconciler) abort(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, rec *Record) (Result, error) {
	if err := r.stopAgents(ctx, rec); err != nil {
		return Result{}, err
	}
	if err := r.deleteTarget(ctx, rec); err != nil {
		return Result{}, err
	}
	if err := r.releaseSource(ctx, rec); err != nil {
		return Result{}, err
	}
	rec.Phase, rec.Message = moveapi.PhaseAborted, "aborted: the target volume is deleted, the claim still uses its volume on "+rec.SourceNode
	if err := r.writeRecord(ctx, pv, rec, rec.ReclaimPolicy); err != nil {
		return Result{}, err
	}
	return Result{}, r.patchClaim(ctx, pvc, rec.status(pv.Name), []string{moveapi.AnnotationAbort, moveapi.AnnotationToNode})
}

// deleteTarget deletes the target LogicalVolume, only the one this move made.
func (r *Reconciler) deleteTarget(ctx context.Context, rec *Record) error {
	lv, err := r.logicalVolume(ctx, rec.TargetVolume)
	if err != nil || lv == nil {
		return err
	}
	if lv.Annotations[moveapi.AnnotationID] == rec.ID && lv.Name != rec.SourceVolume && lv.DeletionTimestamp.IsZero() {
		uid := lv.UID
		if err := r.Client.Delete(ctx, lv, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the target LogicalVolume %s: %w", lv.Name, err)
		}
	}
	return nil
}

// releaseSource ends the hold on the source and removes what the move left on it: the requests and the
// agent's reports for this move (its node agent withdraws its answer to the hold itself).
func (r *Reconciler) releaseSource(ctx context.Context, rec *Record) error {
	src, err := r.logicalVolume(ctx, rec.SourceVolume)
	if err != nil || src == nil {
		return err
	}
	drop := map[string]bool{}
	for _, k := range []string{moveapi.AnnotationHold, moveapi.AnnotationVerify} {
		_, ok := src.Annotations[k]
		drop[k] = ok && src.Annotations[k] == rec.ID
	}
	for _, k := range []string{moveapi.AnnotationSHA256, moveapi.AnnotationCopyError, moveapi.AnnotationRefusedPod, moveapi.AnnotationVerified} {
		_, drop[k] = moveapi.ReportFor(src.Annotations[k], rec.ID)
	}
	base := src.DeepCopy()
	changed := false
	for k, ok := range drop {
		if ok {
			delete(src.Annotations, k)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := r.Client.Patch(ctx, src, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release the source LogicalVolume %s: %w", src.Name, err)
	}
	return nil
}

// fail records a message that needs the user and stops advancing.
func (r *Reconciler) fail(ctx context.Context, pv *corev1.PersistentVolume, rec *Record, msg string) (Result, error) {
	return wait, r.note(ctx, pv, rec, msg)
}

// holdWait says what the hold on the source waits for; "" once the source's agent holds it: no publication
// stands and every new one is refused.
func holdWait(src *topolvmv1.LogicalVolume, rec *Record) string {
	switch got := agentReport(src, moveapi.AnnotationHeld, rec.ID); got {
	case moveapi.Held:
		return ""
	case "":
		return fmt.Sprintf("waiting for the LVMS node agent on %s to hold the source volume (no pod may use it while it moves)", rec.SourceNode)
	default:
		return fmt.Sprintf("waiting for the source volume to be free on %s: %s; scale what uses the claim to zero", rec.SourceNode, got)
	}
}

// note records msg in the Record when it changed.
func (r *Reconciler) note(ctx context.Context, pv *corev1.PersistentVolume, rec *Record, msg string) error {
	if rec.Message == msg {
		return nil
	}
	rec.Message = msg
	return r.writeRecord(ctx, pv, rec, pv.Spec.PersistentVolumeReclaimPolicy)
}

// setAnnotation sets (or, with "", removes) one annotation of a LogicalVolume.
func (r *Reconciler) setAnnotation(ctx context.Context, lv *topolvmv1.LogicalVolume, key, value string) error {
	if cur, ok := lv.Annotations[key]; (value == "" && !ok) || (ok && cur == value && value != "") {
		return nil
	}
	base := lv.DeepCopy()
	if lv.Annotations == nil {
		lv.Annotations = map[string]string{}
	}
	if value == "" {
		delete(lv.Annotations, key)
	} else {
		lv.Annotations[key] = value
	}
	if err := r.Client.Patch(ctx, lv, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("annotate LogicalVolume %s: %w", lv.Name, err)
	}
	return nil
}

// saveClaim keeps what the claim is recreated from: its labels, its annotations but the binding's and the
// move's own, its spec without the volume name and data source (the data is on the new volume already).
func saveClaim(pvc *corev1.PersistentVolumeClaim) *SavedClaim {
	ann := maps.Clone(pvc.Annotations)
	for _, k := range []string{moveapi.AnnotationToNode, moveapi.AnnotationConfirm, moveapi.AnnotationAbort, moveapi.AnnotationStatus,
		"pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller", "volume.kubernetes.io/selected-node",
		"volume.kubernetes.io/storage-provisioner", "volume.beta.kubernetes.io/storage-provisioner",
		"kubectl.kubernetes.io/last-applied-configuration"} {
		delete(ann, k)
	}
	spec := *pvc.Spec.DeepCopy()
	spec.VolumeName, spec.DataSource, spec.DataSourceRef = "", nil, nil
	return &SavedClaim{Labels: maps.Clone(pvc.Labels), Annotations: ann, Spec: spec}
}
