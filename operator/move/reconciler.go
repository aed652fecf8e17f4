package move

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// retry is how soon a move that waits for something outside LVMS (pods to go, an agent, the claim's
// deletion) is looked at again.
const retry = 10 * time.Second

// Reconciler drives moves. It is stateless: everything it knows comes from the API server, so a
// reconciler killed at any point carries on from the objects at its next start.
type Reconciler struct {
	// Client writes; Reader reads (the API server directly: decisions here delete claims and volumes and
	// must not act on a stale cache).
	Client client.Client
	Reader client.Reader
	Names  driver.Names
}

// Result says when to look at the claim again (0: when something changes).
type Result struct{ RequeueAfter time.Duration }

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
		if pvc == nil || pvc.Annotations[moveapi.AnnotationToNode] == "" {
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

// aborting reports whether the claim asks to abort this move.
func aborting(pvc *corev1.PersistentVolumeClaim, rec *Record) bool {
	v, ok := pvc.Annotations[moveapi.AnnotationAbort]
	return ok && (v == "true" || v == rec.ID)
}

// findRecord returns the source PV and the Record of the active move of claim key; nil when none.
func (r *Reconciler) findRecord(ctx context.Context, key types.NamespacedName) (*corev1.PersistentVolume, *Record, error) {
	list := &corev1.PersistentVolumeList{}
	if err := r.Reader.List(ctx, list); err != nil {
		return nil, nil, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	var pv *corev1.PersistentVolume
	var rec *Record
	for i := range list.Items {
		p := &list.Items[i]
		if _, ok := p.Annotations[AnnotationRecord]; !ok {
			continue
		}
		got, err := recordOf(p)
		if err != nil {
			return nil, nil, err
		}
		if got.Namespace != key.Namespace || got.Claim != key.Name || !got.Phase.Active() {
			continue
		}
		if rec != nil {
			return nil, nil, fmt.Errorf("claim %s has two active moves (PersistentVolumes %s and %s): abort one by hand", key, pv.Name, p.Name)
		}
		pv, rec = p, got
	}
	return pv, rec, nil
}

// sourceVolume finds the LogicalVolume whose volume ID is the PV's handle.
func (r *Reconciler) sourceVolume(ctx context.Context, pv *corev1.PersistentVolume) (*topolvmv1.LogicalVolume, error) {
	if pv.Spec.CSI == nil {
		return nil, nil
	}
	list := &topolvmv1.LogicalVolumeList{}
	if err := r.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list LogicalVolumes: %w", err)
	}
	for i := range list.Items {
		if list.Items[i].Status.VolumeID == pv.Spec.CSI.VolumeHandle {
			return &list.Items[i], nil
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
	users, err := r.users(ctx, pvc.Namespace, pvc.Name)
	if err != nil {
		return Result{}, err
	}
	in.Users = users
	if err := preflight(in); err != nil {
		var refused *RefusedError
		if !errors.As(err, &refused) {
			return Result{}, err
		}
		st := moveapi.Status{Phase: moveapi.PhaseRefused, TargetNode: in.TargetName, Message: refused.Msg}
		if in.PV != nil {
			st.SourcePV = in.PV.Name
		}
		// Looked at again while the request stands: pods going away send no event to the claim.
		return Result{RequeueAfter: retry}, r.patchClaim(ctx, pvc, st, nil)
	}
	pv, src := in.PV, in.Source
	id := moveID(pvc.UID, pv.Name, in.TargetName)
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
