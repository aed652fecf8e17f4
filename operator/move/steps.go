package move

import (
	"context"
	"fmt"
	"maps"

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
		return Result{RequeueAfter: retry}, nil
	}
	if lv.Annotations[moveapi.AnnotationID] != rec.ID || !lv.DeletionTimestamp.IsZero() {
		return Result{RequeueAfter: retry}, r.note(ctx, pv, rec, fmt.Sprintf("waiting for LogicalVolume %s of an earlier attempt to be deleted", lv.Name))
	}
	if lv.Status.Code != 0 {
		return Result{RequeueAfter: retry}, r.note(ctx, pv, rec, fmt.Sprintf("node %s could not create the target volume: %s", rec.TargetNode, lv.Status.Message))
	}
	if lv.Status.VolumeID == "" {
		return Result{RequeueAfter: retry}, r.note(ctx, pv, rec, fmt.Sprintf("waiting for the LVMS node agent on %s to create the target volume", rec.TargetNode))
	}
	// The volume exists: tell the target agent whom to receive from (not earlier: it would try to open a
	// volume that is not there yet) and the source agent where to send, then advance.
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
	if srcSum == "" || dstSum == "" {
		if msg := agentReport(dst, moveapi.AnnotationCopyError, rec.ID) + agentReport(src, moveapi.AnnotationCopyError, rec.ID); msg != "" {
			return Result{RequeueAfter: retry}, r.note(ctx, pv, rec, "the copy failed and is retried from its last verified chunk: "+msg)
		}
		return Result{RequeueAfter: retry}, r.note(ctx, pv, rec, "copying")
	}
	if srcSum != dstSum {
		return r.fail(ctx, pv, rec, fmt.Sprintf("the checksums differ (source %s, target %s): the claim was not swapped; abort the move and start again", srcSum, dstSum))
	}
	rec.Phase, rec.SHA256, rec.Message = moveapi.PhaseSwapping, srcSum, ""
	return Result{}, r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain)
}

// swap replaces the claim by one bound to the new PV. Order: the agents are told to stop (no agent
// writes the target once a claim can use it); no pod may use the claim; the claim is saved in the Record;
// the claim is deleted (precondition: its UID); the claim is created again naming the new PV; the new PV
// is created pre-bound to the new claim's UID. The source PV keeps the old UID in its claimRef, so at no
// point do two PVs claim the claim.
func (r *Reconciler) swap(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, rec *Record) (Result, error) {
	if err := r.stopAgents(ctx, rec); err != nil {
		return Result{}, err
	}
	key := types.NamespacedName{Namespace: rec.Namespace, Name: rec.Claim}
	switch {
	case pvc != nil && pvc.UID == rec.ClaimUID:
		if !pvc.DeletionTimestamp.IsZero() {
			return Result{RequeueAfter: retry}, r.note(ctx, pv, rec, "waiting for the claim to be deleted (kubernetes.io/pvc-protection keeps it while a pod uses it)")
		}
		users, err := r.users(ctx, pvc.Namespace, pvc.Name)
		if err != nil {
			return Result{}, err
		}
		if msg := usersMessage(key.String(), users); msg != "" {
			return Result{RequeueAfter: retry}, r.note(ctx, pv, rec, "the copy is verified, the swap waits: "+msg)
		}
		if rec.Saved == nil {
			rec.Saved = saveClaim(pvc)
			return Result{}, r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain)
		}
		uid := pvc.UID
		if err := r.Client.Delete(ctx, pvc, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("delete claim %s for the swap: %w", key, err)
		}
		return Result{RequeueAfter: retry}, nil
	case pvc == nil:
		if rec.Saved == nil {
			return r.fail(ctx, pv, rec, fmt.Sprintf("claim %s was deleted before the move saved it: the data is on PersistentVolume %s (kept, Retain)", key, pv.Name))
		}
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: rec.Claim, Labels: rec.Saved.Labels, Annotations: maps.Clone(rec.Saved.Annotations)},
			Spec:       *rec.Saved.Spec.DeepCopy(),
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[moveapi.AnnotationStatus] = rec.status(pv.Name).Encode()
		c.Spec.VolumeName = rec.TargetVolume
		if err := r.Client.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
			return Result{}, fmt.Errorf("create claim %s on the new volume: %w", key, err)
		}
		return Result{}, nil
	case pvc.Spec.VolumeName != rec.TargetVolume:
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
	if err := r.writeRecord(ctx, pv, rec, rec.ReclaimPolicy); err != nil {
		return Result{}, err
	}
	return Result{}, r.patchClaim(ctx, pvc, rec.status(pv.Name), []string{moveapi.AnnotationConfirm})
}

// abort returns to the start: the copy instructions are removed, the target LogicalVolume (only the one
// this move made) is deleted and the source PV's reclaim policy is restored. Only before the swap deleted
// the claim.
func (r *Reconciler) abort(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, rec *Record) (Result, error) {
	if err := r.stopAgents(ctx, rec); err != nil {
		return Result{}, err
	}
	lv, err := r.logicalVolume(ctx, rec.TargetVolume)
	if err != nil {
		return Result{}, err
	}
	if lv != nil && lv.Annotations[moveapi.AnnotationID] == rec.ID && lv.Name != rec.SourceVolume && lv.DeletionTimestamp.IsZero() {
		uid := lv.UID
		if err := r.Client.Delete(ctx, lv, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("delete the target LogicalVolume %s: %w", lv.Name, err)
		}
	}
	rec.Phase, rec.Message = moveapi.PhaseAborted, "aborted: the target volume is deleted, the claim still uses its volume on "+rec.SourceNode
	if err := r.writeRecord(ctx, pv, rec, rec.ReclaimPolicy); err != nil {
		return Result{}, err
	}
	return Result{}, r.patchClaim(ctx, pvc, rec.status(pv.Name), []string{moveapi.AnnotationAbort, moveapi.AnnotationToNode})
}

// fail records a message that needs the user and stops advancing.
func (r *Reconciler) fail(ctx context.Context, pv *corev1.PersistentVolume, rec *Record, msg string) (Result, error) {
	return Result{RequeueAfter: retry}, r.note(ctx, pv, rec, msg)
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
