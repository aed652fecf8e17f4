package groupsnapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// Defaults of Options.
const (
	// DefaultMaxSuspend bounds how long the origins of a group stay suspended: applications writing to them
	// wait that long at most.
	DefaultMaxSuspend = 10 * time.Second
	// DefaultCommandTimeout bounds each dmsetup command (a suspend flushes the origin's queued writes).
	DefaultCommandTimeout = 30 * time.Second
	// resumeAttempts is how often a failed resume is tried before the group reports it.
	resumeAttempts = 3
)

// Options configure an Engine.
type Options struct {
	// Runner runs dmsetup and lvm2 (its prefix, devices file, lock directory and per-command timeout).
	Runner lvm.Runner
	// StateDir holds the state files of groups in progress (required; the agent's state directory).
	StateDir string
	// Clock measures the suspend time and enforces MaxSuspend (default the real clock).
	Clock clock.Clock
	// MaxSuspend bounds the time from the first suspend to the last snapshot (default DefaultMaxSuspend).
	MaxSuspend time.Duration
	// CommandTimeout bounds each dmsetup command (default DefaultCommandTimeout).
	CommandTimeout time.Duration
}

// Engine takes group snapshots on one node.
type Engine struct {
	runner         lvm.Runner
	stateDir       string
	clock          clock.Clock
	maxSuspend     time.Duration
	commandTimeout time.Duration
}

// New returns an Engine.
func New(o Options) (*Engine, error) {
	if o.StateDir == "" {
		return nil, errors.New("group snapshots need a state directory")
	}
	e := &Engine{runner: o.Runner, stateDir: o.StateDir, clock: o.Clock, maxSuspend: o.MaxSuspend, commandTimeout: o.CommandTimeout}
	if e.clock == nil {
		e.clock = clock.RealClock{}
	}
	if e.maxSuspend <= 0 {
		e.maxSuspend = DefaultMaxSuspend
	}
	if e.commandTimeout <= 0 {
		e.commandTimeout = DefaultCommandTimeout
	}
	return e, nil
}

// Result is a group snapshot taken.
type Result struct {
	// Snapshots are the members, in the order they were suspended and snapshotted (by origin name).
	Snapshots []Member
	// Suspended is the time from the first suspend to the last resume (0 when the snapshots existed
	// already and nothing was suspended).
	Suspended time.Duration
}

// Take takes the group's snapshots. It refuses a group that is not made of active thin volumes of one
// pool of one volume group (a *RefusedError, nothing created or suspended). Then:
//
//  1. lvm2 creates each snapshot as a single snapshot is made, but inactive (lvcreate -s -k y), which gives
//     it its LV, tags and thin device ID; their content does not matter yet;
//  2. with lvm2's own volume group lock held, every origin is suspended (dmsetup suspend, flushing), each
//     snapshot's thin device is replaced by a snapshot of its origin taken now (thin pool messages delete
//     and create_snap, the kernel's documented way, which needs the origin suspended), and every origin is
//     resumed;
//  3. each snapshot is made read-only and activated, as a single snapshot is.
//
// lvm2 itself cannot take step 2: lvcreate -s of an origin suspended beforehand records the snapshot
// without ever sending the pool its message, and the pool then refuses every new thin volume ("unexpected
// transaction id"; seen with lvm2 2.03.16 on Debian's 6.1 kernel in the VM lane). A file system frozen
// beforehand (fsfreeze) does not help either: lvm2's own suspend then fails with EBUSY. On any failure every origin is resumed and the group's snapshots
// are removed. A group whose snapshots all exist already (a retry) succeeds without suspending anything.
// Take holds LVMS's lock of the volume group throughout.
func (e *Engine) Take(ctx context.Context, req Request) (Result, error) {
	members, err := req.check()
	if err != nil {
		return Result{}, err
	}
	vg := members[0].VG
	unlock, err := e.runner.LockVG(ctx, vg)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	if err := e.recoverPath(ctx, e.intentPath(req.ID)); err != nil {
		return Result{}, err
	}
	rep, err := e.runner.FullReport(ctx)
	if err != nil {
		return Result{}, err
	}
	if taken(members, req.ID, rep) {
		return Result{Snapshots: members}, nil
	}
	if err := checkAgainst(members, rep); err != nil {
		return Result{}, err
	}
	origin, _ := rep.LV(vg, members[0].Origin)
	in := intent{ID: req.ID, Members: members}
	if err := e.writeIntent(in); err != nil {
		return Result{}, err
	}
	tags := append(slices.Clone(req.Tags), lvm.VolumeTag, GroupTag(req.ID))
	return e.take(ctx, in, origin.PoolLV, tags)
}

// taken reports whether every member's snapshot exists as this group made it.
func taken(members []Member, id string, rep *lvm.Report) bool {
	for _, m := range members {
		if lv, ok := rep.LV(m.VG, m.Snapshot); !ok || !ours(lv, m, id) {
			return false
		}
	}
	return true
}

// ours reports whether lv is the snapshot group id made of m's origin.
func ours(lv lvm.LV, m Member, id string) bool {
	return lv.Name == m.Snapshot && lv.Origin == m.Origin && lv.IsThinVolume() && slices.Contains(lv.Tags, GroupTag(id))
}

// take runs the three steps of Take for a recorded intent; on every way out but success, a panic
// included, it removes the group's snapshots (once its origins are resumed) and then its intent.
func (e *Engine) take(ctx context.Context, in intent, pool string, tags []string) (res Result, err error) {
	ok := false
	defer func() {
		if ok {
			return
		}
		res.Snapshots = nil
		if _, stuck := AsResumeError(err); stuck {
			return // the intent stays: Recover resumes and cleans up
		}
		if cerr := e.cleanup(ctx, in); cerr != nil {
			err = errors.Join(err, cerr)
			return
		}
		err = errors.Join(err, e.removeIntent(in.ID))
	}()
	vg := in.Members[0].VG
	for _, m := range in.Members {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("group snapshot %s: %w", in.ID, err)
		}
		args := []string{"-s", "-k", "y", "-n", m.Snapshot, m.VG + "/" + m.Origin}
		for _, t := range tags {
			args = append(args, "--addtag", t)
		}
		if _, err := e.runner.LVMCmd(ctx, "lvcreate", args...); err != nil {
			return res, fmt.Errorf("create snapshot %s/%s of %s: %w", m.VG, m.Snapshot, m.Origin, err)
		}
	}
	lvs, err := e.thinLVs(ctx, vg)
	if err != nil {
		return res, err
	}
	snapIDs, originIDs, err := deviceIDs(in.Members, pool, lvs)
	if err != nil {
		return res, err
	}
	in.Pool, in.SnapshotIDs = pool, snapIDs
	if err := e.writeIntent(in); err != nil {
		return res, err
	}
	res.Suspended, err = e.window(ctx, in, originIDs)
	if err != nil {
		return res, err
	}
	for _, m := range in.Members {
		if err := e.runner.SetReadOnly(ctx, m.VG, m.Snapshot); err != nil {
			return res, err
		}
		if err := e.runner.ActivateWritable(ctx, m.VG, m.Snapshot); err != nil {
			return res, err
		}
	}
	if err := e.removeIntent(in.ID); err != nil {
		return res, err
	}
	ok = true
	res.Snapshots = in.Members
	return res, nil
}

// deviceIDs returns the thin device IDs of the members' snapshots and origins, after checking what makes
// replacing a snapshot's device safe: both in the group's pool, the snapshot inactive, and its ID that of
// no other LV (an origin's least of all).
func deviceIDs(members []Member, pool string, lvs map[string]thinLV) (snaps, origins []uint64, err error) {
	owner := map[uint64]string{}
	for _, lv := range lvs {
		if lv.ThinID != 0 && lv.Pool == pool {
			if other, dup := owner[lv.ThinID]; dup {
				return nil, nil, fmt.Errorf("thin pool %s: LVs %s and %s report the same thin device ID %d; check the pool with lvs -o+thin_id", pool, other, lv.Name, lv.ThinID)
			}
			owner[lv.ThinID] = lv.Name
		}
	}
	for _, m := range members {
		s, o := lvs[m.Snapshot], lvs[m.Origin]
		switch {
		case s.Name == "" || o.Name == "":
			return nil, nil, fmt.Errorf("snapshot %s/%s or its origin %s is missing right after it was created", m.VG, m.Snapshot, m.Origin)
		case s.Pool != pool || o.Pool != pool:
			return nil, nil, fmt.Errorf("snapshot %s/%s (pool %q) or its origin %s (pool %q) is not in thin pool %s", m.VG, m.Snapshot, s.Pool, m.Origin, o.Pool, pool)
		case s.ThinID == 0 || o.ThinID == 0 || s.ThinID == o.ThinID:
			return nil, nil, fmt.Errorf("snapshot %s/%s has thin device ID %d and its origin %s %d; refusing to replace it", m.VG, m.Snapshot, s.ThinID, m.Origin, o.ThinID)
		case len(s.Attr) > 4 && s.Attr[4] != '-':
			return nil, nil, fmt.Errorf("snapshot %s/%s is active (lv_attr %s); it must be inactive until the group is taken", m.VG, m.Snapshot, s.Attr)
		}
		snaps, origins = append(snaps, s.ThinID), append(origins, o.ThinID)
	}
	return snaps, origins, nil
}

// window suspends every origin, replaces each snapshot's thin device with a snapshot of its origin, and
// resumes every origin, in a deferred path that runs on every way out, a panic included. It returns the
// time from the first suspend to the last resume.
func (e *Engine) window(ctx context.Context, in intent, originIDs []uint64) (suspended time.Duration, err error) {
	vg := in.Members[0].VG
	unlock, err := lockLVM2(ctx, e.runner.LockDir, vg)
	if err != nil {
		return 0, err
	}
	defer unlock()
	start := e.clock.Now()
	deadline := start.Add(e.maxSuspend)
	var started []Member
	taken := 0
	defer func() {
		rerr := e.resumeAll(ctx, started)
		suspended = e.clock.Since(start)
		err = errors.Join(err, rerr)
	}()
	run := func(name string, args ...string) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("group snapshot %s: %w", in.ID, err)
		}
		left := deadline.Sub(e.clock.Now())
		if left <= 0 {
			return &DeadlineError{ID: in.ID, MaxSuspend: e.maxSuspend, Taken: taken, Of: len(in.Members)}
		}
		c, cancel := context.WithTimeout(ctx, min(left, e.commandTimeout))
		defer cancel()
		_, err := e.runner.Run(c, name, args...)
		if err != nil && ctx.Err() == nil && errors.Is(c.Err(), context.DeadlineExceeded) && left <= e.commandTimeout {
			return errors.Join(&DeadlineError{ID: in.ID, MaxSuspend: e.maxSuspend, Taken: taken, Of: len(in.Members)}, err)
		}
		return err
	}
	for _, m := range in.Members {
		started = append(started, m) // before the command: a suspend that timed out may still have happened
		if err := run("dmsetup", "suspend", DMName(m.VG, m.Origin)); err != nil {
			return 0, stepError(err, "suspend %s/%s", m.VG, m.Origin)
		}
	}
	pool := poolDevice(vg, in.Pool)
	for i, m := range in.Members {
		if err := run("dmsetup", "message", pool, "0", fmt.Sprintf("delete %d", in.SnapshotIDs[i])); err != nil {
			return 0, stepError(err, "snapshot %s/%s", m.VG, m.Snapshot)
		}
		if err := run("dmsetup", "message", pool, "0", fmt.Sprintf("create_snap %d %d", in.SnapshotIDs[i], originIDs[i])); err != nil {
			return 0, stepError(err, "snapshot %s/%s of %s", m.VG, m.Snapshot, m.Origin)
		}
		taken++
	}
	return 0, nil
}

// stepError says which step failed, except for a *DeadlineError, which says it better itself.
func stepError(err error, format string, a ...any) error {
	var de *DeadlineError
	if errors.As(err, &de) {
		return err
	}
	return fmt.Errorf(format+": %w", append(a, err)...)
}

// DeadlineError is a group abandoned because its origins had been suspended for MaxSuspend: every origin
// was resumed and the group's snapshots were removed.
type DeadlineError struct {
	ID         string
	MaxSuspend time.Duration
	Taken, Of  int
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("group snapshot %s abandoned: its volumes were suspended for the longest allowed (%s) with %d of %d snapshots taken; every volume was resumed and the snapshots were removed; retry when the volume group is less busy",
		e.ID, e.MaxSuspend, e.Taken, e.Of)
}

// ResumeError is an origin that may still be suspended: resuming it failed resumeAttempts times. The
// group's state file is kept, so Recover tries again.
type ResumeError struct {
	VG, LV string
	Err    error
}

func (e *ResumeError) Error() string {
	return fmt.Sprintf("volume %s/%s may still be suspended (applications writing to it wait): resuming it failed %d times: %v; run `dmsetup resume %s` on the node",
		e.VG, e.LV, resumeAttempts, e.Err, DMName(e.VG, e.LV))
}

func (e *ResumeError) Unwrap() error { return e.Err }

// AsResumeError returns the *ResumeError in err's chain.
func AsResumeError(err error) (*ResumeError, bool) {
	var re *ResumeError
	ok := errors.As(err, &re)
	return re, ok
}

// resumeAll resumes origins in order, each tried resumeAttempts times; it runs even when ctx has ended.
func (e *Engine) resumeAll(ctx context.Context, members []Member) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for _, m := range members {
		if err := e.resume(ctx, m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) resume(ctx context.Context, m Member) error {
	name := DMName(m.VG, m.Origin)
	var err error
	for range resumeAttempts {
		c, cancel := context.WithTimeout(ctx, e.commandTimeout)
		_, err = e.runner.Run(c, "dmsetup", "resume", name)
		cancel()
		if err == nil || gone(err) {
			return nil
		}
	}
	return &ResumeError{VG: m.VG, LV: m.Origin, Err: err}
}

// gone reports whether dmsetup failed because the device does not exist (nothing to resume).
func gone(err error) bool {
	ce, ok := lvm.AsCommandError(err)
	return ok && (strings.Contains(ce.Stderr, "does not exist") || strings.Contains(ce.Stderr, "No such device"))
}

// cleanup removes what the group created: LVs named as its snapshots, of its origins, carrying its tag.
// Nothing else, an origin least of all, is removed. A snapshot whose thin device was deleted in the pool
// but not replaced gets an empty one first (create_thin under the ID lvm2 recorded for that LV), so lvm2
// can remove it and the pool stays in step with lvm2's metadata.
func (e *Engine) cleanup(ctx context.Context, in intent) error {
	ctx = context.WithoutCancel(ctx)
	vg := in.Members[0].VG
	rep, err := e.runner.FullReport(ctx)
	if err != nil {
		return fmt.Errorf("remove the snapshots of group %s: %w", in.ID, err)
	}
	var errs []error
	if in.SnapshotIDs != nil {
		if err := e.refill(ctx, in, rep); err != nil {
			return fmt.Errorf("remove the snapshots of group %s: %w", in.ID, err)
		}
	}
	for _, m := range in.Members {
		lv, ok := rep.LV(vg, m.Snapshot)
		if !ok || !ours(lv, m, in.ID) {
			continue
		}
		if err := e.runner.RemoveLV(ctx, vg, m.Snapshot); err != nil {
			errs = append(errs, fmt.Errorf("remove snapshot %s/%s of the failed group %s: %w", vg, m.Snapshot, in.ID, err))
		}
	}
	return errors.Join(errs...)
}

// refill gives every snapshot of the group that lvm2 still lists under its recorded thin device ID a
// device in the pool, when it has none (the pool answers "File exists" when it has one).
func (e *Engine) refill(ctx context.Context, in intent, rep *lvm.Report) error {
	vg := in.Members[0].VG
	lvs, err := e.thinLVs(ctx, vg)
	if err != nil {
		return err
	}
	unlock, err := lockLVM2(ctx, e.runner.LockDir, vg)
	if err != nil {
		return err
	}
	defer unlock()
	for i, m := range in.Members {
		lv, ok := rep.LV(vg, m.Snapshot)
		if t := lvs[m.Snapshot]; !ok || !ours(lv, m, in.ID) || t.Pool != in.Pool || t.ThinID != in.SnapshotIDs[i] {
			continue
		}
		// "exists": the device is there (never deleted, or replaced); "gone": no pool device, so nothing in it
		// was deleted either.
		if err := e.message(ctx, vg, in.Pool, fmt.Sprintf("create_thin %d", in.SnapshotIDs[i])); err != nil && !exists(err) && !gone(err) {
			return err
		}
	}
	return nil
}

// Recover finishes what a killed agent left: for every state file, it resumes the group's origins,
// removes its snapshots and deletes the file. Call it when the agent starts, before serving. A state file
// that cannot be read is reported (with what to do by hand) and kept; the others are still recovered.
func (e *Engine) Recover(ctx context.Context) error {
	paths, err := e.intents()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range paths {
		in, err := readIntent(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		unlock, err := e.runner.LockVG(ctx, in.Members[0].VG)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, e.recoverPath(ctx, p))
		unlock()
	}
	return errors.Join(errs...)
}

// recoverPath recovers the group of one state file, if it exists; the caller holds the VG lock.
func (e *Engine) recoverPath(ctx context.Context, path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	in, err := readIntent(path)
	if err != nil {
		return err
	}
	if err := e.resumeAll(ctx, in.Members); err != nil {
		return fmt.Errorf("recover group snapshot %s: %w", in.ID, err)
	}
	if err := e.cleanup(ctx, in); err != nil {
		return fmt.Errorf("recover group snapshot %s: %w", in.ID, err)
	}
	return e.removeIntent(in.ID)
}
