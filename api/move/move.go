// Package move is the vocabulary of volume moves (`lvms move`, operator/move) that the operator, the node
// agents and the consoles share: the annotations on claims and LogicalVolumes, the phases, and the status a
// claim shows its user.
package move

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Prefix begins every move annotation.
const Prefix = "move.lvm.topolvm.io/"

// Annotations on the PersistentVolumeClaim, written by the user (the CLI acts with the user's kubeconfig).
const (
	// AnnotationToNode asks to move the claim's volume to the node it names.
	AnnotationToNode = Prefix + "to-node"
	// AnnotationConfirm confirms the move whose ID it holds: the source volume is released.
	AnnotationConfirm = Prefix + "confirm"
	// AnnotationAbort aborts the move whose ID it holds (or any move, "true") before the swap.
	AnnotationAbort = Prefix + "abort"
)

// Annotations written by LVMS.
const (
	// AnnotationStatus on the claim is the move's Status (JSON) for the user.
	AnnotationStatus = Prefix + "status"
	// AnnotationID on the target LogicalVolume is the move's ID: only a LogicalVolume with it is ever deleted
	// by an abort.
	AnnotationID = Prefix + "id"
	// AnnotationReceiveFrom on the target LogicalVolume names the source node and LogicalVolume
	// ("<node>/<logicalvolume>"): the target node's agent receives from that node only.
	AnnotationReceiveFrom = Prefix + "receive-from"
	// AnnotationSendTo on the source LogicalVolume names the target ("<node>/<logicalvolume>/<move ID>"): the
	// source node's agent sends to that node only.
	AnnotationSendTo = Prefix + "send-to"
	// AnnotationSHA256 on a LogicalVolume is written by its node's agent: "<move ID>:<hex SHA-256 of the
	// whole volume>", for the source once it was sent, for the target once the copy was verified.
	AnnotationSHA256 = Prefix + "sha256"
	// AnnotationCopyError on a LogicalVolume is its agent's last copy error ("<move ID>:<message>").
	AnnotationCopyError = Prefix + "copy-error"
	// AnnotationProgress on the target LogicalVolume is the receiver's high-water mark ("<chunks>/<total>").
	AnnotationProgress = Prefix + "progress"
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

// PastAbort reports whether a move in phase p can no longer be aborted: from the swap on the claim uses, or
// is switching to, the new volume.
func (p Phase) PastAbort() bool {
	return p == PhaseSwapping || p == PhaseAwaitingConfirmation
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

// Encode is the status as AnnotationStatus holds it.
func (s Status) Encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}
