package wizard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
)

// PreflightValid is how long a passed preflight lets apply start.
const PreflightValid = 15 * time.Minute

// maxEvents bounds the progress a run keeps (the oldest go first).
const maxEvents = 200

// Run is one step run in the background.
type Run struct {
	ID                 uint64
	Namespace, Cluster string
	Action             handover.Action
	// By names who started it (the caller as the front end knows it).
	By string
	// Started and Ended (zero while it runs).
	Started, Ended time.Time
	// Events are its progress, oldest first.
	Events []handover.Progress
	// Err is why it stopped early; empty when it ended well.
	Err string
	// Checks of a preflight; Verification of a verify.
	Checks       []handover.Check
	Verification *handover.Verification
}

// Running reports whether the run has not ended.
func (r *Run) Running() bool { return r.Ended.IsZero() }

// Passed reports whether the run ended well: no error, no failed preflight check, no verify difference.
func (r *Run) Passed() bool {
	switch {
	case r.Running() || r.Err != "":
		return false
	case r.Action == handover.ActionPreflight:
		return !handover.Failed(r.Checks)
	case r.Action == handover.ActionVerify:
		return r.Verification != nil && len(r.Verification.Differences) == 0
	}
	return true
}

// Latest is the last progress event, if any.
func (r *Run) Latest() (handover.Progress, bool) {
	if len(r.Events) == 0 {
		return handover.Progress{}, false
	}
	return r.Events[len(r.Events)-1], true
}

// ErrBusy is returned when a step of the same migration is already running here.
var ErrBusy = errors.New("a step of this migration is already running: wait for it to end, or stop it")

// Runner runs the steps of migrations in the background, at most one at a time per migration, and keeps
// the last run of each (and when its last preflight passed) for the front ends.
type Runner struct {
	// Poll is how often a run's waits look again (default handover.DefaultPoll); set it before the first
	// Start.
	Poll time.Duration

	life  context.Context
	clock clock.Clock

	mu     sync.Mutex
	nextID uint64
	runs   map[string]*entry
}

type entry struct {
	run           Run
	cancel        context.CancelFunc
	preflightPass time.Time
}

// NewRunner returns a runner whose runs stop when life ends. clk bounds the migrator's waits and stamps the
// runs (nil: the real clock).
func NewRunner(life context.Context, clk clock.Clock) *Runner {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Runner{life: life, clock: clk, runs: map[string]*entry{}}
}

func key(ns, cluster string) string { return ns + "/" + cluster }

// Options of a run.
type Options struct {
	// AcceptLossy lets preflight and apply go on with a lossy plan.
	AcceptLossy bool
	// By names the caller, for the run's record.
	By string
}

// Start runs the action (preflight, apply, verify or rollback) of the migration of LVMCluster ns/cluster
// with c, the caller's client, in the background. It returns ErrBusy when a step of it is running.
func (r *Runner) Start(c client.Client, ns, cluster string, a handover.Action, opts Options) (Run, error) {
	switch a {
	case handover.ActionPreflight, handover.ActionApply, handover.ActionVerify, handover.ActionRollback:
	default:
		return Run{}, fmt.Errorf("%q is not a step that runs (preflight, apply, verify, rollback)", a)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(ns, cluster)
	e := r.runs[k]
	if e != nil && e.run.Running() {
		return Run{}, ErrBusy
	}
	if e == nil {
		e = &entry{}
		r.runs[k] = e
	}
	r.nextID++
	ctx, cancel := context.WithCancel(r.life)
	e.run = Run{ID: r.nextID, Namespace: ns, Cluster: cluster, Action: a, By: opts.By, Started: r.clock.Now()}
	e.cancel = cancel
	id := e.run.ID
	m := &handover.Migrator{Client: c, Clock: r.clock, Poll: r.Poll, Progress: func(p handover.Progress) { r.event(k, id, p) }}
	go func() {
		defer cancel()
		checks, ver, err := do(ctx, m, ns, cluster, a, opts)
		r.finish(k, id, checks, ver, err)
	}()
	return r.copyLocked(e), nil
}

// do runs one action as the CLI's command of the same name does.
func do(ctx context.Context, m *handover.Migrator, ns, cluster string, a handover.Action, opts Options) ([]handover.Check, *handover.Verification, error) {
	if a == handover.ActionVerify {
		v, err := m.Verify(ctx, ns, cluster)
		return nil, v, err
	}
	p, err := handover.PlanFromCluster(ctx, m.Client, ns, cluster)
	if err != nil {
		return nil, nil, err
	}
	switch a {
	case handover.ActionPreflight:
		if p == nil {
			return nil, nil, fmt.Errorf("no LVMCluster %s/%s to migrate", ns, cluster)
		}
		checks, err := m.Preflight(ctx, p, handover.PreflightOptions{AcceptLossy: opts.AcceptLossy})
		return checks, nil, err
	case handover.ActionApply:
		if p != nil && p.Lossy() && !opts.AcceptLossy {
			lossy, _ := p.Counts()
			return nil, nil, fmt.Errorf("the plan is lossy: %s in v2alpha1; read the plan, then accept the differences", plan.LossyMappings(lossy))
		}
		return nil, nil, m.Apply(ctx, ns, cluster, p)
	}
	return nil, nil, m.Rollback(ctx, ns, cluster, p)
}

func (r *Runner) event(k string, id uint64, p handover.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.runs[k]; e != nil && e.run.ID == id {
		e.run.Events = append(e.run.Events, p)
		if n := len(e.run.Events); n > maxEvents {
			e.run.Events = slices.Delete(e.run.Events, 0, n-maxEvents)
		}
	}
}

func (r *Runner) finish(k string, id uint64, checks []handover.Check, v *handover.Verification, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.runs[k]
	if e == nil || e.run.ID != id {
		return
	}
	e.run.Ended, e.run.Checks, e.run.Verification = r.clock.Now(), checks, v
	switch {
	case errors.Is(err, context.Canceled):
		e.run.Err = "stopped before the end; run the step again to resume, or roll back"
	case err != nil:
		e.run.Err = err.Error()
	}
	if e.run.Action == handover.ActionPreflight {
		e.preflightPass = time.Time{}
		if e.run.Passed() {
			e.preflightPass = e.run.Ended
		}
	}
}

// Stop cancels the running step of the migration, if any; it ends at its next wait or API call.
func (r *Runner) Stop(ns, cluster string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.runs[key(ns, cluster)]
	if e == nil || !e.run.Running() {
		return false
	}
	e.cancel()
	return true
}

// Last returns the last run of the migration, if there was one.
func (r *Runner) Last(ns, cluster string) (Run, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.runs[key(ns, cluster)]
	if e == nil {
		return Run{}, false
	}
	return r.copyLocked(e), true
}

// PreflightPassed reports whether the last preflight of the migration passed within PreflightValid.
func (r *Runner) PreflightPassed(ns, cluster string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.runs[key(ns, cluster)]
	return e != nil && !e.preflightPass.IsZero() && r.clock.Since(e.preflightPass) < PreflightValid
}

func (r *Runner) copyLocked(e *entry) Run {
	run := e.run
	run.Events = slices.Clone(run.Events)
	run.Checks = slices.Clone(run.Checks)
	return run
}

// Now is the runner's clock's time (front ends stamp their pages with it).
func (r *Runner) Now() time.Time { return r.clock.Now() }
