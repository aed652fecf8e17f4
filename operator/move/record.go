package move

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	moveapi "github.com/lvms-dev/lvms/api/move"
)

// Annotations only the operator reads and writes, on PersistentVolumes.
const (
	// AnnotationRecord on the source PersistentVolume is the move's Record (JSON).
	AnnotationRecord = moveapi.Prefix + "record"
	// AnnotationMovedFrom on the new PersistentVolume names the source PersistentVolume.
	AnnotationMovedFrom = moveapi.Prefix + "moved-from"
)

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
	SourceVolume string        `json:"sourceVolume"`
	TargetNode   string        `json:"targetNode"`
	TargetVolume string        `json:"targetVolume"`
	Phase        moveapi.Phase `json:"phase"`
	// ReclaimPolicy is the source PV's policy before the move set Retain; it is restored on confirm or abort.
	ReclaimPolicy corev1.PersistentVolumeReclaimPolicy `json:"reclaimPolicy"`
	// SHA256 is the digest both agents reported.
	SHA256 string `json:"sha256,omitempty"`
	// Saved is the claim, saved before it is deleted for the swap.
	Saved *SavedClaim `json:"saved,omitempty"`
	// NewClaimUID is the recreated claim's UID.
	NewClaimUID types.UID `json:"newClaimUID,omitempty"`
	// Verified is the digest of the whole source as its agent read it again after the claim was released:
	// the claim is created on the new volume only once it is SHA256.
	Verified string `json:"verified,omitempty"`
	// Restore: the source changed after the copy; the claim is created again on the source PV.
	Restore bool   `json:"restore,omitempty"`
	Message string `json:"message,omitempty"`
}

// moveID is the ID of the request, at the claim's resourceVersion version, to move the volume of claim uid on
// source PV pv to node. A request made again (after an abort or a refusal) is a new version of the claim, so
// a new move never mistakes what the agents reported for an earlier one (its digests, its progress, its
// target volume still being deleted) for its own.
func moveID(uid types.UID, version, pv, node string) string {
	h := sha256.Sum256([]byte(string(uid) + "\x00" + version + "\x00" + pv + "\x00" + node))
	return hex.EncodeToString(h[:8])
}

// Field indexes of the move controller's cache (SetupWithManager).
const (
	// indexRecordClaim: PersistentVolumes by the "<namespace>/<name>" of the claim of their active Record.
	indexRecordClaim = "move.lvm.topolvm.io/record-claim"
	// indexRecordID: PersistentVolumes by the ID of their active Record.
	indexRecordID = "move.lvm.topolvm.io/record-id"
	// indexVolumeID: LogicalVolumes by status.volumeID.
	indexVolumeID = "move.lvm.topolvm.io/volume-id"
)

// recordKeys are pv's values in a record index: none unless it holds an active Record.
func recordKeys(pv *corev1.PersistentVolume, index string) []string {
	rec, err := recordOf(pv)
	if err != nil || rec == nil || !rec.Phase.Active() {
		return nil
	}
	switch index {
	case indexRecordClaim:
		return []string{rec.Namespace + "/" + rec.Claim}
	case indexRecordID:
		return []string{rec.ID}
	}
	return nil
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

func (r *Record) status(sourcePV string) moveapi.Status {
	return moveapi.Status{ID: r.ID, Phase: r.Phase, TargetNode: r.TargetNode, SourcePV: sourcePV, TargetPV: r.TargetVolume, SHA256: r.SHA256, Message: r.Message}
}
