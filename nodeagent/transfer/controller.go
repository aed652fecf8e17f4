package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
)

// IdentitySource gives this node's transfer identity; transfercert.Requester asks the operator's signer.
type IdentitySource interface {
	Identity(ctx context.Context) (*blockcopy.Identity, error)
}

// VolumeGroupFunc returns the volume group of a device class ("" is the default class) and whether the
// class is thin; an unknown class is an error.
type VolumeGroupFunc func(deviceClass string) (vg string, thin bool, err error)

// ErrReceiverNotReady is returned by Addresses while the target node's agent has not published its
// receiver's address for the move: the sender waits, it is not a failed copy.
var ErrReceiverNotReady = errors.New("the receiver is not ready")

// identityTimeout bounds one request for the transfer certificate, so that an operator that does not
// answer is reported on the move's LogicalVolume (and asked again) instead of waited for in silence.
const identityTimeout = 2 * time.Minute

// DefaultBackoff is the wait between failed attempts of a move.
var DefaultBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}

// ControllerOptions configure a Controller.
type ControllerOptions struct {
	// NodeName is this node: only its LogicalVolumes are acted on.
	NodeName string
	// Client reads this node's LogicalVolumes (the manager's cache) and patches their annotations.
	Client client.Client
	// Reader reads LogicalVolumes from the API server: the receiver's address on the target, a volume's
	// ID before its device is opened. nil: Client.
	Reader client.Reader
	// Identity gives the node's transfer certificate; it is asked on the first move and again when the
	// certificate is within a third of its lifetime of expiring.
	Identity IdentitySource
	// Devices opens logical volumes; nil: FileDevices over LogicalVolumePaths (DeviceDir/<vg>/<volume ID>).
	Devices Devices
	// VolumeGroup and DeviceDir ("": /dev) locate the default Devices' files.
	VolumeGroup VolumeGroupFunc
	DeviceDir   string
	// ListenHost, ListenPort, ProgressDir, ChunkSize and IdleTimeout are the Runner's.
	ListenHost  string
	ListenPort  int
	ProgressDir string
	ChunkSize   int
	IdleTimeout time.Duration
	// Pools says which targets are thin and how full their pools are (Runner.Pools; nil: targets are
	// written like thick ones and no pool is watched).
	Pools Pools
	// Clock is the copy's clock (blockcopy deadlines); nil: the real clock.
	Clock clock.PassiveClock
	// Timers waits between attempts and dates the certificate's renewal; nil: the real clock.
	Timers clock.WithTicker
	// Backoff is the wait between failed attempts of a move (zero: DefaultBackoff).
	Backoff wait.Backoff
	// Logger logs every move with its ID (zero: the controller-runtime logger).
	Logger logr.Logger
}

// Controller runs this node's side of moves: for each of the node's LogicalVolumes with a send-to, a
// sender; with a receive-from and a move ID, a receiver. Each runs in its own goroutine, keyed by
// "<logical volume>/<move ID>", until it succeeds or its instruction is removed or changed; a failed
// attempt is retried with backoff (the receiver resumes at its high-water mark).
type Controller struct {
	o        ControllerOptions
	runner   Runner
	reporter Reporter
	identity *cachedIdentity
	log      logr.Logger

	base context.Context
	stop context.CancelFunc
	wake chan event.GenericEvent
	wg   sync.WaitGroup

	mu     sync.Mutex
	runs   map[string]*run
	closed bool
}

// run is one move's goroutine on one LogicalVolume.
type run struct {
	job
	cancel   context.CancelFunc
	stopping bool
	done     bool          // succeeded: not run again while the instruction stays
	poke     chan struct{} // the target LogicalVolume changed: a waiting sender looks again at once
}

// job is what a LogicalVolume's annotations ask of this node.
type job struct {
	key, lv  string
	send     *SendInstruction
	receive  *ReceiveInstruction
	reported bool // the LogicalVolume carries this move's SHA-256 already
}

func (j job) id() string {
	if j.send != nil {
		return j.send.MoveID
	}
	return j.receive.MoveID
}

func (j job) same(o job) bool {
	switch {
	case j.send != nil && o.send != nil:
		return *j.send == *o.send
	case j.receive != nil && o.receive != nil:
		return *j.receive == *o.receive
	}
	return false
}

// NewController returns a Controller; SetupWithManager registers it.
func NewController(o ControllerOptions) *Controller {
	if o.Reader == nil {
		o.Reader = o.Client
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Timers == nil {
		o.Timers = clock.RealClock{}
	}
	if o.Backoff == (wait.Backoff{}) {
		o.Backoff = DefaultBackoff
	}
	if o.Logger.GetSink() == nil {
		o.Logger = ctrl.Log.WithName("transfer")
	}
	log := o.Logger.WithValues("node", o.NodeName)
	devices := o.Devices
	if devices == nil {
		devices = FileDevices{Resolve: LogicalVolumePaths{Reader: o.Reader, NodeName: o.NodeName, VolumeGroup: o.VolumeGroup, Dir: o.DeviceDir}.Resolve}
	}
	reporter := APIReporter{Client: o.Client, NodeName: o.NodeName}
	base, stop := context.WithCancel(logr.NewContext(context.Background(), log))
	return &Controller{o: o, log: log, reporter: reporter, base: base, stop: stop,
		wake: make(chan event.GenericEvent, 128), runs: map[string]*run{},
		identity: &cachedIdentity{source: o.Identity, clock: o.Timers, sema: make(chan struct{}, 1)},
		runner: Runner{Devices: devices, Reporter: &throttledProgress{Reporter: reporter, clock: o.Clock, last: map[string]time.Time{}}, Addresses: APIAddresses{Reader: o.Reader},
			ListenHost: o.ListenHost, ListenPort: o.ListenPort, ProgressDir: o.ProgressDir,
			ChunkSize: o.ChunkSize, IdleTimeout: o.IdleTimeout, Clock: o.Clock, Pools: o.Pools}}
}

// +kubebuilder:rbac:groups=topolvm.io,resources=logicalvolumes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=create;get

// SetupWithManager registers the controller: it looks at this node's LogicalVolumes that carry (or
// carried) a move instruction, and at the LogicalVolumes of other nodes that receive from this node
// (their receiver's address wakes this node's sender).
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(c); err != nil {
		return err
	}
	mine := func(o client.Object) bool {
		lv, ok := o.(*topolvmv1.LogicalVolume)
		return ok && lv.Spec.NodeName == c.o.NodeName
	}
	instructed := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return mine(e.Object) && hasInstruction(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return mine(e.ObjectNew) && (hasInstruction(e.ObjectOld) || hasInstruction(e.ObjectNew))
		},
		DeleteFunc:  func(e event.DeleteEvent) bool { return mine(e.Object) && hasInstruction(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return mine(e.Object) },
	}
	receivesFromMe := predicate.NewPredicateFuncs(func(o client.Object) bool { return c.sourceOf(o) != "" })
	return ctrl.NewControllerManagedBy(mgr).Named("transfer-"+c.o.NodeName).
		For(&topolvmv1.LogicalVolume{}, builder.WithPredicates(instructed)).
		Watches(&topolvmv1.LogicalVolume{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if src := c.sourceOf(o); src != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: src}}}
			}
			return nil
		}), builder.WithPredicates(receivesFromMe)).
		WatchesRawSource(source.Channel(c.wake, &handler.EnqueueRequestForObject{})).
		Complete(c)
}

func hasInstruction(o client.Object) bool {
	a := o.GetAnnotations()
	return a[move.AnnotationSendTo] != "" || a[move.AnnotationReceiveFrom] != ""
}

// sourceOf is the source LogicalVolume of a target LogicalVolume that receives from this node ("" for
// any other).
func (c *Controller) sourceOf(o client.Object) string {
	node, lv, ok := strings.Cut(o.GetAnnotations()[move.AnnotationReceiveFrom], "/")
	if !ok || node != c.o.NodeName {
		return ""
	}
	return lv
}

// Start waits for the manager to stop, then cancels every move and waits for their goroutines.
func (c *Controller) Start(ctx context.Context) error {
	<-ctx.Done()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every node's agent runs its moves.
func (c *Controller) NeedLeaderElection() bool { return false }

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lv := &topolvmv1.LogicalVolume{}
	if err := c.o.Client.Get(ctx, req.NamespacedName, lv); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		c.sync(req.Name, nil)
		return ctrl.Result{}, nil
	}
	if lv.Spec.NodeName != c.o.NodeName || !lv.DeletionTimestamp.IsZero() {
		c.sync(lv.Name, nil)
		return ctrl.Result{}, nil
	}
	jobs, refusals := instructions(lv)
	c.sync(lv.Name, jobs)
	var errs []error
	for _, r := range refusals {
		value := report(r.id, "refused the move instruction: "+r.err.Error())
		if lv.Annotations[move.AnnotationCopyError] == value {
			continue
		}
		c.log.Error(r.err, "Refused a move instruction", "logicalVolume", lv.Name, "moveID", r.id)
		if err := c.reporter.Annotate(ctx, lv.Name, move.AnnotationCopyError, value); err != nil {
			errs = append(errs, err)
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

type refusal struct {
	id  string
	err error
}

// instructions reads a LogicalVolume's move annotations; a malformed one is refused, with the move ID
// as far as it can be read.
func instructions(lv *topolvmv1.LogicalVolume) ([]job, []refusal) {
	a := lv.Annotations
	var jobs []job
	var refusals []refusal
	if v := a[move.AnnotationSendTo]; v != "" {
		in, err := ParseSendTo(v)
		if err != nil {
			refusals = append(refusals, refusal{id: v[strings.LastIndex(v, "/")+1:], err: err})
		} else {
			_, reported := reportFor(a[move.AnnotationSHA256], in.MoveID)
			jobs = append(jobs, job{key: lv.Name + "/" + in.MoveID, lv: lv.Name, send: &in, reported: reported})
		}
	}
	if v := a[move.AnnotationReceiveFrom]; v != "" {
		in, err := ParseReceiveFrom(v, a[move.AnnotationID])
		if err != nil {
			refusals = append(refusals, refusal{id: a[move.AnnotationID], err: err})
		} else {
			_, reported := reportFor(a[move.AnnotationSHA256], in.MoveID)
			jobs = append(jobs, job{key: lv.Name + "/" + in.MoveID, lv: lv.Name, receive: &in, reported: reported})
		}
	}
	return jobs, refusals
}

// sync makes the runs of LogicalVolume lv those of jobs: a run whose instruction went or changed is
// cancelled (its end wakes lv again, so that a new run for the same key starts only after the old one
// ended); a wanted one that is not running starts unless it already reported.
func (c *Controller) sync(lv string, jobs []job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[string]job{}
	for _, j := range jobs {
		if _, dup := want[j.key]; !dup {
			want[j.key] = j
		}
	}
	for key, r := range c.runs {
		if r.lv != lv {
			continue
		}
		if j, ok := want[key]; ok && j.same(r.job) {
			continue
		}
		if r.done {
			delete(c.runs, key)
			continue
		}
		if !r.stopping {
			c.log.Info("Stopping the move: its instruction was removed or changed", "moveID", r.id(), "logicalVolume", lv)
			r.stopping = true
			r.cancel()
		}
	}
	for key, j := range want {
		r, ok := c.runs[key]
		switch {
		case ok && !r.stopping && !r.done:
			select {
			case r.poke <- struct{}{}:
			default:
			}
		case ok, j.reported, c.closed:
		default:
			c.start(j)
		}
	}
}

// start runs j in a goroutine; c.mu is held.
func (c *Controller) start(j job) {
	ctx, cancel := context.WithCancel(c.base)
	r := &run{job: j, cancel: cancel, poke: make(chan struct{}, 1)}
	c.runs[j.key] = r
	c.wg.Add(1)
	go c.loop(ctx, r)
}

// loop runs attempts of r until one succeeds or r is cancelled.
func (c *Controller) loop(ctx context.Context, r *run) {
	defer c.wg.Done()
	log := c.log.WithValues("moveID", r.id(), "logicalVolume", r.lv)
	if r.send != nil {
		log = log.WithValues("role", "send", "targetNode", r.send.TargetNode, "targetVolume", r.send.TargetVolume)
	} else {
		log = log.WithValues("role", "receive", "sourceNode", r.receive.SourceNode, "sourceVolume", r.receive.SourceVolume)
	}
	ctx = logr.NewContext(ctx, log)
	log.Info("Starting the move")
	backoff := c.o.Backoff
	ok := false
	for {
		err := c.attempt(ctx, r)
		if err == nil {
			log.Info("Copied; the SHA-256 is reported")
			ok = true
			break
		}
		if ctx.Err() != nil {
			log.Info("Stopped", "reason", context.Cause(ctx))
			break
		}
		notReady := errors.Is(err, ErrReceiverNotReady)
		d := backoff.Step()
		if notReady {
			log.V(1).Info("Waiting for the receiver's address", "reason", err.Error(), "next", d)
		} else {
			log.Error(err, "The copy failed; trying again", "next", d)
		}
		if !c.wait(ctx, r, d, notReady) {
			log.Info("Stopped", "reason", context.Cause(ctx))
			break
		}
	}
	c.mu.Lock()
	if c.runs[r.key] == r {
		if ok && !r.stopping {
			r.done = true
		} else {
			delete(c.runs, r.key)
		}
	}
	c.mu.Unlock()
	r.cancel()
	// Wake the LogicalVolume: a new run for the same key may wait for this one's end.
	lv := &topolvmv1.LogicalVolume{}
	lv.Name, lv.Spec.NodeName = r.lv, c.o.NodeName
	select {
	case c.wake <- event.GenericEvent{Object: lv}:
	case <-c.base.Done():
	}
}

// wait waits d (on the Timers clock), or less when poked and pokes count; false when ctx ended.
func (c *Controller) wait(ctx context.Context, r *run, d time.Duration, pokes bool) bool {
	t := c.o.Timers.NewTimer(d)
	defer t.Stop()
	var poke chan struct{}
	if pokes {
		poke = r.poke
	}
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
	case <-poke:
	}
	return true
}

// attempt runs r once with the node's current identity.
func (c *Controller) attempt(ctx context.Context, r *run) error {
	id, err := c.identity.get(ctx)
	if err != nil {
		err = fmt.Errorf("no transfer certificate for node %s: %w", c.o.NodeName, err)
		if ctx.Err() == nil {
			if rerr := c.reporter.Annotate(ctx, r.lv, move.AnnotationCopyError, report(r.id(), err.Error())); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return err
	}
	runner := c.runner
	runner.Identity = id
	if r.send != nil {
		return runner.Send(ctx, r.lv, *r.send)
	}
	return runner.Receive(ctx, r.lv, *r.receive)
}

// cachedIdentity asks its source once and again when the certificate is within a third of its
// lifetime (counted from when it was received) of expiring.
type cachedIdentity struct {
	source  IdentitySource
	clock   clock.PassiveClock
	sema    chan struct{}
	id      *blockcopy.Identity
	renewAt time.Time
}

func (c *cachedIdentity) get(ctx context.Context) (*blockcopy.Identity, error) {
	select {
	case c.sema <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-c.sema }()
	now := c.clock.Now()
	if c.id != nil && now.Before(c.renewAt) {
		return c.id, nil
	}
	if c.source == nil {
		return nil, errors.New("no source of transfer certificates")
	}
	rctx, cancel := context.WithTimeout(ctx, identityTimeout)
	defer cancel()
	logr.FromContextOrDiscard(ctx).Info("Asking for the node's transfer certificate")
	id, err := c.source.Identity(rctx)
	if err != nil {
		if c.id != nil && now.Before(c.id.NotAfter()) {
			logr.FromContextOrDiscard(ctx).Error(err, "Renewing the transfer certificate failed; the current one is used until it expires", "notAfter", c.id.NotAfter())
			c.renewAt = now.Add(time.Minute)
			return c.id, nil
		}
		return nil, err
	}
	c.id = id
	c.renewAt = now.Add(id.NotAfter().Sub(now) * 2 / 3)
	logr.FromContextOrDiscard(ctx).Info("Got the node's transfer certificate", "notAfter", id.NotAfter(), "renewAfter", c.renewAt)
	return id, nil
}

// progressInterval is the least time between two progress annotations of one LogicalVolume: the
// receiver reports every synced step, which would be a write to the API server per chunk.
const progressInterval = time.Second

// throttledProgress passes at most one progress annotation per progressInterval and LogicalVolume, and
// always the last one ("<n>/<n>"); every other annotation goes through.
type throttledProgress struct {
	Reporter
	clock clock.PassiveClock
	mu    sync.Mutex
	last  map[string]time.Time
}

func (t *throttledProgress) Annotate(ctx context.Context, logicalVolume, key, value string) error {
	if key == move.AnnotationProgress && value != "" {
		next, total, _ := strings.Cut(value, "/")
		now := t.clock.Now()
		t.mu.Lock()
		last, seen := t.last[logicalVolume]
		skip := next != total && seen && now.Sub(last) < progressInterval
		if next == total {
			delete(t.last, logicalVolume)
		} else if !skip {
			t.last[logicalVolume] = now
		}
		t.mu.Unlock()
		if skip {
			return nil
		}
	}
	return t.Reporter.Annotate(ctx, logicalVolume, key, value)
}

// APIReporter writes annotations on this node's LogicalVolumes with a JSON merge patch of the one
// annotation; it refuses a LogicalVolume of another node.
type APIReporter struct {
	Client   client.Client
	NodeName string
}

// Annotate implements Reporter.
func (a APIReporter) Annotate(ctx context.Context, logicalVolume, key, value string) error {
	lv := &topolvmv1.LogicalVolume{}
	if err := a.Client.Get(ctx, types.NamespacedName{Name: logicalVolume}, lv); err != nil {
		return fmt.Errorf("annotate LogicalVolume %s: %w", logicalVolume, err)
	}
	if lv.Spec.NodeName != a.NodeName {
		return fmt.Errorf("refusing to annotate LogicalVolume %s: it is on node %q, this agent acts for node %q only", logicalVolume, lv.Spec.NodeName, a.NodeName)
	}
	var v any = value
	if value == "" {
		v = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	if err != nil {
		return err
	}
	if err := a.Client.Patch(ctx, lv, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotate LogicalVolume %s with %s: %w", logicalVolume, key, err)
	}
	return nil
}

// APIAddresses reads the receiver's address from the target LogicalVolume (AnnotationReceiver).
type APIAddresses struct {
	Reader client.Reader
}

// ReceiverAddress implements Addresses; it is ErrReceiverNotReady until the target carries the address
// for this move.
func (a APIAddresses) ReceiverAddress(ctx context.Context, targetVolume, moveID string) (string, error) {
	lv := &topolvmv1.LogicalVolume{}
	if err := a.Reader.Get(ctx, types.NamespacedName{Name: targetVolume}, lv); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%w: the target LogicalVolume %s does not exist", ErrReceiverNotReady, targetVolume)
		}
		return "", fmt.Errorf("read the target LogicalVolume %s: %w", targetVolume, err)
	}
	addr, ok := reportFor(lv.Annotations[AnnotationReceiver], moveID)
	if !ok || addr == "" {
		return "", fmt.Errorf("%w: the target LogicalVolume %s has no receiver address for move %s yet", ErrReceiverNotReady, targetVolume, moveID)
	}
	return addr, nil
}

// LogicalVolumePaths maps this node's LogicalVolumes to their device files, Dir/<volume group>/<volume
// ID> (Dir "" is /dev).
type LogicalVolumePaths struct {
	Reader      client.Reader
	NodeName    string
	VolumeGroup VolumeGroupFunc
	Dir         string
}

// Resolve is FileDevices.Resolve.
func (p LogicalVolumePaths) Resolve(logicalVolume string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lv := &topolvmv1.LogicalVolume{}
	if err := p.Reader.Get(ctx, types.NamespacedName{Name: logicalVolume}, lv); err != nil {
		return "", fmt.Errorf("read LogicalVolume %s: %w", logicalVolume, err)
	}
	if lv.Spec.NodeName != p.NodeName {
		return "", fmt.Errorf("LogicalVolume %s is on node %q, this agent acts for node %q only", logicalVolume, lv.Spec.NodeName, p.NodeName)
	}
	id := lv.Status.VolumeID
	if id == "" {
		return "", fmt.Errorf("LogicalVolume %s has no volume ID yet (status.volumeID is empty)", logicalVolume)
	}
	if p.VolumeGroup == nil {
		return "", errors.New("no volume groups known")
	}
	vg, _, err := p.VolumeGroup(lv.Spec.DeviceClass)
	if err != nil {
		return "", fmt.Errorf("device class %q of LogicalVolume %s: %w", lv.Spec.DeviceClass, logicalVolume, err)
	}
	for _, name := range []string{vg, id} {
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			return "", fmt.Errorf("LogicalVolume %s: %q is not a volume group or logical volume name", logicalVolume, name)
		}
	}
	dir := p.Dir
	if dir == "" {
		dir = "/dev"
	}
	return filepath.Join(dir, vg, id), nil
}

var (
	_ Reporter  = APIReporter{}
	_ Addresses = APIAddresses{}
)
