// Package move is the vocabulary of volume moves (`lvms move`, operator/move) that the operator, the node
// agents and the consoles share: the annotations on claims and LogicalVolumes, the phases, and the status a
// claim shows its user.
package move

import (
	"encoding/json"
	"fmt"
	"strings"

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

	// AnnotationHold on the source LogicalVolume holds the move's ID from the move's start until it is aborted or
	// confirmed: while it is there, the CSI node service of the volume's node refuses to publish the volume, so no
	// pod writes it while it is copied, verified and swapped.
	AnnotationHold = Prefix + "hold"
	// AnnotationHeld on the source LogicalVolume is its agent's answer to the hold: "<move ID>:held" once every new
	// publication is refused and none stands; "<move ID>:<why not>" while the volume is still published.
	AnnotationHeld = Prefix + "held"
	// AnnotationRefusedPod on the source LogicalVolume is the last pod its agent refused the volume to during the
	// move ("<move ID>:<namespace>/<pod>").
	AnnotationRefusedPod = Prefix + "refused-pod"
	// AnnotationVerify on the source LogicalVolume asks its agent, once the claim is released, to hash the whole
	// held source again ("<move ID>"); the agent answers in AnnotationVerified.
	AnnotationVerify = Prefix + "verify"
	// AnnotationVerified on the source LogicalVolume is that hash: "<move ID>:<hex SHA-256>", or
	// "<move ID>:error: <message>" when the volume could not be read.
	AnnotationVerified = Prefix + "verified"
)

// Held is the value of AnnotationHeld (after "<move ID>:") once the source is held.
const Held = "held"

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

// Report is "<move ID>:<value>", the shape of every annotation an agent writes for a move.
func Report(id, value string) string { return id + ":" + value }

// ReportFor reads "<move ID>:<value>" for move id from an annotation's value; ok is false when it is for
// another move (or none).
func ReportFor(v, id string) (string, bool) {
	if id == "" {
		return "", false
	}
	return strings.CutPrefix(v, id+":")
}
