// Package groupsnapshot takes crash-consistent snapshots of several thin volumes of one thin pool on one
// node: every snapshot holds its origin as it was at one common instant, so a write acknowledged before
// the first suspend is in every snapshot it went to, and a write that depends on one the snapshots miss
// is missed too.
//
// How (see Engine.Take): lvm2 creates each snapshot LV first, inactive, as a single snapshot is made;
// then, holding lvm2's volume group lock, every origin is suspended with device-mapper (flushing, and
// freezing a file system on it), each snapshot's thin device is replaced in the pool by a snapshot of its
// origin (thin pool messages delete and create_snap), and every origin is resumed; last, the snapshots are
// made read-only and activated. lvm2 cannot snapshot an origin someone else suspended: it records the
// snapshot without sending the pool its message, which leaves the pool refusing new volumes.
//
// Safety rules, each with a test: a group is checked before anything is created or suspended (active thin
// volumes of one pool of one volume group, no snapshot name taken) and refused otherwise; the thin device
// replaced is a snapshot's of this group, inactive, whose ID no other LV has; origins are resumed on every
// path (success, a failed command, a cancelled context, a panic, the suspend deadline); the intent is
// written to a state file before anything is created, so Recover resumes what a killed agent left
// suspended and removes its snapshots; only snapshots this group created (its tag, its origins) are ever
// removed, never an origin.
package groupsnapshot
