package move

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// Reconciler drives moves. It is stateless: everything it knows comes from the API server, so a
// reconciler killed at any point carries on from the objects at its next start.
type Reconciler struct {
	// Client writes. Reader reads the API server directly: decisions here delete claims and volumes and
	// must not act on a stale cache. With SetupWithManager, Client's cache answers the lookups by index (the
	// PersistentVolume holding a claim's move, the LogicalVolume of a volume ID), and what they find is read
	// again from Reader before it is acted on; without, the lookups list from Reader.
	Client client.Client
	Reader client.Reader
	Names  driver.Names
	// Admission, when set, says why moves may not start now ("" when they may): the admission policies that
	// keep node agents to their own node and move requests to those who may delete the claim are not in
	// place (operator/admission).
	Admission func() string

	indexed bool
}

// Result says whether to look at the claim again.
type Result struct {
	// Wait: the move waits for something that sends the operator no event (pods going away, an agent's
	// work): look again after the controller's backoff for the claim, which grows while nothing changes.
	Wait bool
}

var wait = Result{Wait: true}

// Reconcile advances the move of claim key by one step.
func (r *Reconciler) Reconcile(ctx context.Context, key types.NamespacedName) (Result, error) {
	pv, rec, err := r.findRecord(ctx, key)
	if err != nil {
		return Result{}, err
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Reader.Get(ctx, key, pvc); apierrors.IsNotFound(err) {
		pvc = nil
	} else if err != nil {
		return Result{}, fmt.Errorf("get claim %s: %w", key, err)
	}
	if rec == nil {
		if pvc == nil || pvc.Annotations[moveapi.AnnotationToNode] == "" || refusedAlready(pvc) {
			return Result{}, nil
		}
		return r.start(ctx, pvc)
	}
	if pvc != nil && pvc.UID == rec.ClaimUID && pvc.DeletionTimestamp.IsZero() && aborting(pvc, rec) {
		return r.abort(ctx, pvc, pv, rec)
	}
	var res Result
	switch rec.Phase {
	case moveapi.PhaseCreatingTarget:
		res, err = r.createTarget(ctx, pv, rec)
	case moveapi.PhaseCopying:
		res, err = r.copying(ctx, pv, rec)
	case moveapi.PhaseSwapping:
		res, err = r.swap(ctx, pvc, pv, rec)
	case moveapi.PhaseAwaitingConfirmation:
		res, err = r.awaitConfirmation(ctx, pvc, pv, rec)
	default:
		return Result{}, fmt.Errorf("PersistentVolume %s: move %s has unknown phase %q", pv.Name, rec.ID, rec.Phase)
	}
	if err != nil {
		return res, err
	}
	return res, r.showStatus(ctx, key, pv, rec)
}

// refusedAlready reports whether the claim shows the refusal of its standing request: a refused request is
// not tried again until the user asks again (move.Request clears the refusal), so that no one makes the
// operator re-run the preflight on a claim forever by annotating it.
func refusedAlready(pvc *corev1.PersistentVolumeClaim) bool {
	st, ok, err := moveapi.ParseStatus(pvc)
	return err == nil && ok && st.Phase == moveapi.PhaseRefused && st.TargetNode == pvc.Annotations[moveapi.AnnotationToNode]
}

// aborting reports whether the claim asks to abort this move.
func aborting(pvc *corev1.PersistentVolumeClaim, rec *Record) bool {
	v, ok := pvc.Annotations[moveapi.AnnotationAbort]
	return ok && (v == "true" || v == rec.ID)
}

// findRecord returns the source PV and the Record of the active move of claim key; nil when none. The
// PersistentVolumes are found through the cache's index and read again from the API server.
func (r *Reconciler) findRecord(ctx context.Context, key types.NamespacedName) (*corev1.PersistentVolume, *Record, error) {
	candidates, err := r.recordPVs(ctx, indexRecordClaim, key.String())
	if err != nil {
		return nil, nil, err
	}
	var pv *corev1.PersistentVolume
	var rec *Record
	for _, name := range candidates {
		p := &corev1.PersistentVolume{}
		if err := r.Reader.Get(ctx, types.NamespacedName{Name: name}, p); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, nil, fmt.Errorf("get PersistentVolume %s: %w", name, err)
		}
		got, err := recordOf(p)
		if err != nil {
			return nil, nil, err
		}
		if got == nil || got.Namespace != key.Namespace || got.Claim != key.Name || !got.Phase.Active() {
			continue
		}
		if rec != nil {
			return nil, nil, fmt.Errorf("claim %s has two active moves (PersistentVolumes %s and %s): abort one by hand", key, pv.Name, p.Name)
		}
		pv, rec = p, got
	}
	return pv, rec, nil
}

// recordPVs names the PersistentVolumes whose active Record has value in index: from the cache's index, or
// (without one) by listing the API server.
func (r *Reconciler) recordPVs(ctx context.Context, index, value string) ([]string, error) {
	list := &corev1.PersistentVolumeList{}
	var err error
	if r.indexed {
		err = r.Client.List(ctx, list, client.MatchingFields{index: value})
	} else {
		err = r.Reader.List(ctx, list)
	}
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	var out []string
	for i := range list.Items {
		if slices.Contains(recordKeys(&list.Items[i], index), value) {
			out = append(out, list.Items[i].Name)
		}
	}
	return out, nil
}

// sourceVolume finds the LogicalVolume whose volume ID is the PV's handle.
func (r *Reconciler) sourceVolume(ctx context.Context, pv *corev1.PersistentVolume) (*topolvmv1.LogicalVolume, error) {
	if pv.Spec.CSI == nil || pv.Spec.CSI.VolumeHandle == "" {
		return nil, nil
	}
	handle := pv.Spec.CSI.VolumeHandle
	list := &topolvmv1.LogicalVolumeList{}
	var err error
	if r.indexed {
		err = r.Client.List(ctx, list, client.MatchingFields{indexVolumeID: handle})
	} else {
		err = r.Reader.List(ctx, list)
	}
	if err != nil {
		return nil, fmt.Errorf("list LogicalVolumes: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].Status.VolumeID == handle {
			return r.logicalVolume(ctx, list.Items[i].Name)
		}
	}
	return nil, nil
}

// users lists the pods of the claim's namespace that use it.
func (r *Reconciler) users(ctx context.Context, namespace, claim string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.Reader.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	var out []corev1.Pod
	for i := range pods.Items {
		if usesClaim(&pods.Items[i], claim) {
			out = append(out, pods.Items[i])
		}
	}
	return out, nil
}

// start runs the preflight and, when it passes, records the move and sets the source PV's reclaim policy
// to Retain in one write.
func (r *Reconciler) start(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (Result, error) {
	in := preflightInput{Names: r.Names, Claim: pvc, TargetName: pvc.Annotations[moveapi.AnnotationToNode]}
	if pvc.Spec.VolumeName != "" {
		pv := &corev1.PersistentVolume{}
		if err := r.Reader.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err == nil {
			in.PV = pv
		} else if !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("get PersistentVolume %s: %w", pvc.Spec.VolumeName, err)
		}
	}
	if in.PV != nil {
		src, err := r.sourceVolume(ctx, in.PV)
		if err != nil {
			return Result{}, err
		}
		in.Source = src
	}
	if len(validation.IsDNS1123Subdomain(in.TargetName)) == 0 { // else the preflight says why
		node := &corev1.Node{}
		if err := r.Reader.Get(ctx, types.NamespacedName{Name: in.TargetName}, node); err == nil {
			in.Target = node
		} else if !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("get node %s: %w", in.TargetName, err)
		}
	}
	if in.PV != nil && in.PV.Spec.StorageClassName != "" {
		sc := &storagev1.StorageClass{}
		if err := r.Reader.Get(ctx, types.NamespacedName{Name: in.PV.Spec.StorageClassName}, sc); err == nil {
			in.Class = sc
		} else if !apierrors.IsNotFound(err) {
			return Result{}, fmt.Errorf("get StorageClass %s: %w", in.PV.Spec.StorageClassName, err)
		}
	}
	users, err := r.users(ctx, pvc.Namespace, pvc.Name)
	if err != nil {
		return Result{}, err
	}
	in.Users = users
	if r.Admission != nil {
		in.Unsafe = r.Admission()
	}
	if err := preflight(in); err != nil {
		var refused *RefusedError
		if !errors.As(err, &refused) {
			return Result{}, err
		}
		st := moveapi.Status{Phase: moveapi.PhaseRefused, TargetNode: in.TargetName, Message: refused.Msg}
		if in.PV != nil {
			st.SourcePV = in.PV.Name
		}
		// Not tried again until the user asks again (refusedAlready).
		return Result{}, r.patchClaim(ctx, pvc, st, nil)
	}
	pv, src := in.PV, in.Source
	if cur, err := recordOf(pv); err != nil || cur != nil && cur.Phase.Active() {
		// The cache has not seen this PV's record yet (it was read from the API server just now): never two.
		return wait, err
	}
	id := moveID(pvc.UID, pvc.ResourceVersion, pv.Name, in.TargetName)
	rec := &Record{
		ID: id, Namespace: pvc.Namespace, Claim: pvc.Name, ClaimUID: pvc.UID,
		SourceNode: src.Spec.NodeName, SourceVolume: src.Name, TargetNode: in.TargetName, TargetVolume: targetName(id),
		Phase: moveapi.PhaseCreatingTarget, ReclaimPolicy: pv.Spec.PersistentVolumeReclaimPolicy,
	}
	if err := r.writeRecord(ctx, pv, rec, corev1.PersistentVolumeReclaimRetain); err != nil {
		return Result{}, err
	}
	return Result{}, r.patchClaim(ctx, pvc, rec.status(pv.Name), nil)
}

// writeRecord stores rec on pv and sets its reclaim policy, in one update (optimistic lock: a PV changed
// since it was read is read again).
func (r *Reconciler) writeRecord(ctx context.Context, pv *corev1.PersistentVolume, rec *Record, policy corev1.PersistentVolumeReclaimPolicy) error {
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	pv.Annotations[AnnotationRecord] = rec.encode()
	pv.Spec.PersistentVolumeReclaimPolicy = policy
	if err := r.Client.Update(ctx, pv); err != nil {
		return fmt.Errorf("record move %s on PersistentVolume %s: %w", rec.ID, pv.Name, err)
	}
	return nil
}

// patchClaim shows st on the claim and removes the annotations named in drop.
func (r *Reconciler) patchClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim, st moveapi.Status, drop []string) error {
	raw := st.Encode()
	if pvc.Annotations[moveapi.AnnotationStatus] == raw && !hasAny(pvc.Annotations, drop) {
		return nil
	}
	base := pvc.DeepCopy()
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[moveapi.AnnotationStatus] = raw
	for _, k := range drop {
		delete(pvc.Annotations, k)
	}
	if err := r.Client.Patch(ctx, pvc, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("show the move's status on claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

// showStatus mirrors the Record onto the claim, when the claim exists.
func (r *Reconciler) showStatus(ctx context.Context, key types.NamespacedName, pv *corev1.PersistentVolume, rec *Record) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Reader.Get(ctx, key, pvc); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("get claim %s: %w", key, err)
	}
	st := rec.status(pv.Name)
	if lv, err := r.logicalVolume(ctx, rec.TargetVolume); err == nil && lv != nil {
		st.Progress = lv.Annotations[moveapi.AnnotationProgress]
	}
	if src, err := r.logicalVolume(ctx, rec.SourceVolume); err == nil && src != nil && rec.Phase.Active() && !rec.Phase.PastAbort() {
		if pod := agentReport(src, moveapi.AnnotationRefusedPod, rec.ID); pod != "" {
			refused := fmt.Sprintf("Pod %s tried to use the claim on %s and was refused: the claim's volume is being moved; it can start once the claim uses the new volume or the move is aborted", pod, rec.SourceNode)
			st.Message = strings.TrimPrefix(st.Message+"; "+refused, "; ")
		}
	}
	return r.patchClaim(ctx, pvc, st, nil)
}

func hasAny(m map[string]string, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// logicalVolume gets a LogicalVolume by name; nil when it does not exist.
func (r *Reconciler) logicalVolume(ctx context.Context, name string) (*topolvmv1.LogicalVolume, error) {
	lv := &topolvmv1.LogicalVolume{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Name: name}, lv); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("get LogicalVolume %s: %w", name, err)
	}
	return lv, nil
}

// agentReport reads "<move ID>:<value>" from a LogicalVolume annotation an agent wrote; "" unless it is
// for this move.
func agentReport(lv *topolvmv1.LogicalVolume, key, id string) string {
	v, ok := strings.CutPrefix(lv.Annotations[key], id+":")
	if !ok {
		return ""
	}
	return v
}
