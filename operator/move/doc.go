// Package move moves a volume to another node (`lvms move`): a new volume of the same class and size on
// the target node, a block copy agent to agent (nodeagent/blockcopy), a checksum both agents report, a
// swap of the PersistentVolume the claim is bound to, and the source kept until the user confirms.
//
// The flow is driven by annotations, so that what a user may do is what the API server lets them do with
// the claim: the request (AnnotationToNode), the confirmation (AnnotationConfirm) and an abort
// (AnnotationAbort) are annotations on the PersistentVolumeClaim, written with the user's own rights in the
// claim's namespace; nothing names a claim in another namespace. The progress is a Record on the source
// PersistentVolume (cluster-scoped, it outlives the claim during the swap); the claim carries a copy for
// the user (AnnotationStatus).
//
// Phases, each step idempotent and the Record written before the world is changed further:
//
//	(none)            preflight: the claim is Bound to an LVMS PV that claims it back, the target node exists,
//	                  is not the source, has the device class with enough capacity, and no pod uses the claim
//	CreatingTarget    the source PV's reclaim policy is set to Retain in the same write that records the move;
//	                  a LogicalVolume of the same class and size is created on the target node
//	Copying           the source LogicalVolume is told where to send (AnnotationSendTo), the target one whom to
//	                  receive from; each agent reports the SHA-256 of its whole volume (AnnotationSHA256)
//	Swapping          both digests are equal; no pod uses the claim (checked again); the claim is saved in the
//	                  Record, deleted (precondition: its UID), created again with spec.volumeName naming the new
//	                  PV, and only then the new PV is created, pre-bound to the new claim's UID
//	AwaitingConfirmation  the claim uses the new volume; the source PV (Retain, Released) and its LV are kept
//	Done              confirmed: the source PV's original reclaim policy is restored, so a Delete policy
//	                  releases it the normal way (the provisioner's deleter)
//	Aborted           aborted before the claim was deleted: the target volume is deleted, the policy restored
//
// At every step at most one PersistentVolume claims the claim: the source PV's claimRef keeps the old
// claim's UID, and the new PV is created after the new claim, with the new claim's UID.
package move
