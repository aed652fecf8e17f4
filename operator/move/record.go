package move

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const prefix = "move.lvm.topolvm.io/"

// Annotations on the PersistentVolumeClaim, written by the user (the CLI acts with the user's kubeconfig).
const (
	// AnnotationToNode asks to move the claim's volume to the node it names.
	AnnotationToNode = prefix + "to-node"
	// AnnotationConfirm confirms the move whose ID it holds: the source volume is released.
	AnnotationConfirm = prefix + "confirm"
	// AnnotationAbort aborts the move whose ID it holds (or any move, "true") before the swap.
	AnnotationAbort = prefix + "abort"
)

// Annotations written by LVMS.
const (
	// AnnotationStatus on the claim is the move's Status (JSON) for the user.
	AnnotationStatus = prefix + "status"
	// AnnotationRecord on the source PersistentVolume is the move's Record (JSON).
	AnnotationRecord = prefix + "record"
	// AnnotationMovedFrom on the new PersistentVolume names the source PersistentVolume.
	AnnotationMovedFrom = prefix + "moved-from"
	// AnnotationID on the target LogicalVolume is the move's ID: only a LogicalVolume with it is ever deleted
	// by an abort.
	AnnotationID = prefix + "id"
	// AnnotationReceiveFrom on the target LogicalVolume names the source node and LogicalVolume
	// ("<node>/<logicalvolume>"): the target node's agent receives from that node only.
	AnnotationReceiveFrom = prefix + "receive-from"
	// AnnotationSendTo on the source LogicalVolume names the target ("<node>/<logicalvolume>/<move ID>"): the
	// source node's agent sends to that node only.
	AnnotationSendTo = prefix + "send-to"
	// AnnotationSHA256 on a LogicalVolume is written by its node's agent: "<move ID>:<hex SHA-256 of the
	// whole volume>", for the source once it was sent, for the target once the copy was verified.
	AnnotationSHA256 = prefix + "sha256"
	// AnnotationCopyError on a LogicalVolume is its agent's last copy error ("<move ID>:<message>").
	AnnotationCopyError = prefix + "copy-error"
	// AnnotationProgress on the target LogicalVolume is the receiver's high-water mark ("<chunks>/<total>").
	AnnotationProgress = prefix + "progress"
)

// Phase is a move's step.
type Phase string

// Phases of a move, in order; Aborted ends one early.
const (
	PhaseCreatingTarget       Phase = "CreatingTarget"
	PhaseCopying              Phase = "Copying"
	PhaseSwapping             Phase = "Swapping"
	PhaseAwaitingConfirmation Phase = "AwaitingConfirmation"
	PhaseDone                 Phase = "Done"
	PhaseAborted              Phase = "Aborted"
	// PhaseRefused is shown on a claim whose move request the preflight refused (nothing was changed).
	PhaseRefused Phase = "Refused"
)

// Active reports whether a move in phase p holds the claim (begun, not Done or Aborted).
func (p Phase) Active() bool {
	return p != "" && p != PhaseDone && p != PhaseAborted && p != PhaseRefused
}

// SavedClaim is what a claim is recreated from after the swap.
type SavedClaim struct {
	Labels      map[string]string                `json:"labels,omitempty"`
	Annotations map[string]string                `json:"annotations,omitempty"`
	Spec        corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// Record is a move's persisted progress, on the source PersistentVolume.
type Record struct {
	ID         string    `json:"id"`
	Namespace  string    `json:"namespace"`
	Claim      string    `json:"claim"`
	ClaimUID   types.UID `json:"claimUID"`
	SourceNode string    `json:"sourceNode"`
	// SourceVolume is the source LogicalVolume's name; TargetVolume the target's, which is also the new
	// PersistentVolume's name.
	SourceVolume string `json:"sourceVolume"`
	TargetNode   string `json:"targetNode"`
	TargetVolume string `json:"targetVolume"`
	Phase        Phase  `json:"phase"`
	// ReclaimPolicy is the source PV's policy before the move set Retain; it is restored on confirm or abort.
	ReclaimPolicy corev1.PersistentVolumeReclaimPolicy `json:"reclaimPolicy"`
	// SHA256 is the digest both agents reported.
	SHA256 string `json:"sha256,omitempty"`
	// Saved is the claim, saved before it is deleted for the swap.
	Saved *SavedClaim `json:"saved,omitempty"`
	// NewClaimUID is the recreated claim's UID.
	NewClaimUID types.UID `json:"newClaimUID,omitempty"`
	Message     string    `json:"message,omitempty"`
}

// Status is what the claim shows the user.
type Status struct {
	ID         string `json:"id"`
	Phase      Phase  `json:"phase"`
	TargetNode string `json:"targetNode"`
	SourcePV   string `json:"sourcePV"`
	TargetPV   string `json:"targetPV"`
	Progress   string `json:"progress,omitempty"`
	SHA256     string `json:"sha256,omitempty"`
	Message    string `json:"message,omitempty"`
}

// moveID is the ID of moving the volume of claim uid on source PV pv to node: the same inputs give the
// same ID, so a move interrupted before its Record was written names the same target volume again.
func moveID(uid types.UID, pv, node string) string {
	h := sha256.Sum256([]byte(string(uid) + "\x00" + pv + "\x00" + node))
	return hex.EncodeToString(h[:8])
}

// targetName is the target LogicalVolume's and new PersistentVolume's name.
func targetName(id string) string { return "lvms-move-" + id }

// recordOf reads the Record on pv; nil when it has none.
func recordOf(pv *corev1.PersistentVolume) (*Record, error) {
	raw, ok := pv.Annotations[AnnotationRecord]
	if !ok {
		return nil, nil
	}
	r := &Record{}
	if err := json.Unmarshal([]byte(raw), r); err != nil {
		return nil, fmt.Errorf("PersistentVolume %s: annotation %s is not a move record (%v): fix or remove it by hand", pv.Name, AnnotationRecord, err)
	}
	if r.ID == "" || r.Namespace == "" || r.Claim == "" || r.TargetVolume == "" {
		return nil, fmt.Errorf("PersistentVolume %s: annotation %s lacks the move ID, claim or target: fix or remove it by hand", pv.Name, AnnotationRecord)
	}
	return r, nil
}

func (r *Record) encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

func (r *Record) status(sourcePV string) Status {
	return Status{ID: r.ID, Phase: r.Phase, TargetNode: r.TargetNode, SourcePV: sourcePV, TargetPV: r.TargetVolume, SHA256: r.SHA256, Message: r.Message}
}

// ParseStatus reads the move status a claim carries; ok is false when it carries none.
func ParseStatus(pvc *corev1.PersistentVolumeClaim) (Status, bool, error) {
	raw, ok := pvc.Annotations[AnnotationStatus]
	if !ok {
		return Status{}, false, nil
	}
	var s Status
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return Status{}, true, fmt.Errorf("claim %s/%s: annotation %s is not a move status: %w", pvc.Namespace, pvc.Name, AnnotationStatus, err)
	}
	return s, true, nil
}

func encodeStatus(s Status) string {
	b, _ := json.Marshal(s)
	return string(b)
}
