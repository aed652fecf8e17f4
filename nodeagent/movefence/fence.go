// Package movefence is the node agent's side of a move's hold on its source volume (api/move AnnotationHold).
// While the operator holds a LogicalVolume of this node, the controller here holds the volume in the CSI node
// service, which from then on refuses to publish it; it answers the hold (AnnotationHeld) only once no
// publication of the volume stands, so that the operator starts the copy only when no pod can write the source.
// It reports the pods the node service refused (AnnotationRefusedPod), and when the operator asks, once the claim
// was released, it hashes the whole held volume again (AnnotationVerify, AnnotationVerified): the swap goes ahead
// only when the source is still what was copied.
package movefence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
	"github.com/lvms-dev/lvms/nodeagent/csinode"
)

// Fence is the CSI node service's hold on volumes (csinode.Node).
type Fence interface {
	// Hold refuses every publication of volumeID from now on and returns where it is published still.
	Hold(ctx context.Context, volumeID, moveID string) ([]string, error)
	// Release ends the hold.
	Release(volumeID string)
	// Device is the volume's device file and where it is published.
	Device(ctx context.Context, volumeID string) (string, []string, error)
}

// Reporter writes an annotation on one of this node's LogicalVolumes ("" removes it): transfer.APIReporter.
type Reporter interface {
	Annotate(ctx context.Context, logicalVolume, key, value string) error
}

// DefaultRecheck is how soon a hold that waits for a publication to go is looked at again: unpublishing sends
// no event. Reading the mount table is all it costs; nothing is written unless the answer changed.
const DefaultRecheck = 5 * time.Second

// DefaultBackoff is the wait between failed verifications.
var DefaultBackoff = wait.Backoff{Duration: 2 * time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: time.Minute}

// Options configure a Controller.
type Options struct {
	// NodeName is this node: only its LogicalVolumes are acted on.
	NodeName string
	// Client reads this node's LogicalVolumes (the manager's cache).
	Client client.Reader
	// Reporter writes the answers (AnnotationHeld, AnnotationRefusedPod, AnnotationVerified).
	Reporter Reporter
	Fence    Fence
	// Open opens a device for reading, with its size (nil: the file, sized by seeking to its end).
	Open func(path string) (io.ReaderAt, int64, io.Closer, error)
	// Timers waits between failed verifications (nil: the real clock); Backoff is that wait (zero:
	// DefaultBackoff).
	Timers  clock.WithTicker
	Backoff wait.Backoff
	// Recheck is how soon a hold waiting for a publication to go looks again (0: DefaultRecheck).
	Recheck time.Duration
	Logger  logr.Logger
}

// Controller holds this node's volumes that are a move's source.
type Controller struct {
	o    Options
	log  logr.Logger
	wake chan event.GenericEvent

	mu       sync.Mutex
	held     map[string]string // LogicalVolume name → volume ID, for the release once the LogicalVolume is gone
	refused  map[string]csinode.Refusal
	verifies map[string]context.CancelFunc // "<LogicalVolume>/<move ID>"
	base     context.Context
	wg       sync.WaitGroup
}

// New returns a Controller; SetupWithManager registers it.
func New(o Options) *Controller {
	if o.Timers == nil {
		o.Timers = clock.RealClock{}
	}
	if o.Backoff == (wait.Backoff{}) {
		o.Backoff = DefaultBackoff
	}
	if o.Recheck <= 0 {
		o.Recheck = DefaultRecheck
	}
	if o.Open == nil {
		o.Open = openFile
	}
	if o.Logger.GetSink() == nil {
		o.Logger = ctrl.Log.WithName("movefence")
	}
	return &Controller{o: o, log: o.Logger.WithValues("node", o.NodeName), wake: make(chan event.GenericEvent, 64),
		held: map[string]string{}, refused: map[string]csinode.Refusal{}, verifies: map[string]context.CancelFunc{}}
}

// Refused is csinode.Options.OnRefused: the refusal is remembered and reported on the LogicalVolume.
func (c *Controller) Refused(r csinode.Refusal) {
	if r.LogicalVolume == "" {
		return
	}
	c.mu.Lock()
	c.refused[r.LogicalVolume] = r
	c.mu.Unlock()
	lv := &topolvmv1.LogicalVolume{}
	lv.Name, lv.Spec.NodeName = r.LogicalVolume, c.o.NodeName
	select {
	case c.wake <- event.GenericEvent{Object: lv}:
	default: // a wake is pending already; it reads the latest refusal
	}
}

// SetupWithManager registers the controller for this node's LogicalVolumes that carry, or carried, a hold or a
// request to verify.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(c); err != nil {
		return err
	}
	mine := func(o client.Object) bool {
		lv, ok := o.(*topolvmv1.LogicalVolume)
		return ok && lv.Spec.NodeName == c.o.NodeName
	}
	concerned := func(o client.Object) bool {
		a := o.GetAnnotations()
		return a[move.AnnotationHold] != "" || a[move.AnnotationHeld] != "" || a[move.AnnotationVerify] != ""
	}
	p := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return mine(e.Object) && concerned(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return mine(e.ObjectNew) && (concerned(e.ObjectOld) || concerned(e.ObjectNew))
		},
		DeleteFunc:  func(e event.DeleteEvent) bool { return mine(e.Object) && concerned(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return mine(e.Object) },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("movefence-"+c.o.NodeName).
		For(&topolvmv1.LogicalVolume{}, builder.WithPredicates(p)).
		WatchesRawSource(source.Channel(c.wake, &handler.EnqueueRequestForObject{})).
		Complete(c)
}

// Start keeps the context the verifications run in; at the end it cancels them and waits.
func (c *Controller) Start(ctx context.Context) error {
	c.mu.Lock()
	c.base = ctx
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	for _, cancel := range c.verifies {
		cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every node's agent holds its own volumes.
func (c *Controller) NeedLeaderElection() bool { return false }

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lv := &topolvmv1.LogicalVolume{}
	if err := c.o.Client.Get(ctx, req.NamespacedName, lv); apierrors.IsNotFound(err) {
		c.release(req.Name)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if lv.Spec.NodeName != c.o.NodeName {
		return ctrl.Result{}, nil
	}
	id := lv.Annotations[move.AnnotationHold]
	if id == "" {
		c.release(lv.Name)
		if _, ok := lv.Annotations[move.AnnotationHeld]; ok {
			return ctrl.Result{}, c.o.Reporter.Annotate(ctx, lv.Name, move.AnnotationHeld, "")
		}
		return ctrl.Result{}, nil
	}
	volumeID := lv.Status.VolumeID
	if volumeID == "" {
		return ctrl.Result{}, c.report(ctx, lv, move.AnnotationHeld, move.Report(id, "the volume has no volume ID yet"))
	}
	c.mu.Lock()
	c.held[lv.Name] = volumeID
	refusal := c.refused[lv.Name]
	c.mu.Unlock()

	pubs, err := c.o.Fence.Hold(ctx, volumeID, id)
	answer := move.Report(id, move.Held)
	switch {
	case err != nil:
		answer = move.Report(id, "cannot tell whether the volume is in use: "+err.Error())
	case len(pubs) > 0:
		answer = move.Report(id, "the volume is still published at "+strings.Join(pubs, ", ")+": a pod uses it")
	}
	var errs []error
	if answer != lv.Annotations[move.AnnotationHeld] {
		if answer == move.Report(id, move.Held) {
			c.log.Info("Holding the source of a move: no pod may use it until the move ends", "logicalVolume", lv.Name, "moveID", id)
		}
		errs = append(errs, c.o.Reporter.Annotate(ctx, lv.Name, move.AnnotationHeld, answer))
	}
	if refusal.MoveID == id && refusal.Pod != "" {
		errs = append(errs, c.report(ctx, lv, move.AnnotationRefusedPod, move.Report(id, refusal.Pod)))
	}
	if lv.Annotations[move.AnnotationVerify] == id && answer == move.Report(id, move.Held) {
		if sum, ok := move.ReportFor(lv.Annotations[move.AnnotationVerified], id); !ok || strings.HasPrefix(sum, "error: ") {
			c.verify(lv.Name, volumeID, id)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	if answer != move.Report(id, move.Held) {
		return ctrl.Result{RequeueAfter: c.o.Recheck}, nil
	}
	return ctrl.Result{}, nil
}

// report writes value unless the LogicalVolume carries it.
func (c *Controller) report(ctx context.Context, lv *topolvmv1.LogicalVolume, key, value string) error {
	if lv.Annotations[key] == value {
		return nil
	}
	return c.o.Reporter.Annotate(ctx, lv.Name, key, value)
}

// release ends the hold of a LogicalVolume's volume and its verifications.
func (c *Controller) release(lv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.held[lv]; ok {
		c.o.Fence.Release(id)
		delete(c.held, lv)
		c.log.Info("Released the source of a move", "logicalVolume", lv)
	}
	delete(c.refused, lv)
	for key, cancel := range c.verifies {
		if strings.HasPrefix(key, lv+"/") {
			cancel()
		}
	}
}

// verify hashes the held volume in a goroutine (at most one per LogicalVolume and move) until it succeeds
// or the hold ends, and reports the digest, or each failure.
func (c *Controller) verify(lv, volumeID, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := lv + "/" + id
	if _, running := c.verifies[key]; running || c.base == nil || c.base.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(c.base)
	c.verifies[key] = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.verifies, key)
			c.mu.Unlock()
			cancel()
		}()
		log := c.log.WithValues("logicalVolume", lv, "moveID", id)
		backoff := c.o.Backoff
		for {
			log.Info("Verifying the source of a move: hashing the whole volume")
			sum, err := c.hash(ctx, volumeID)
			if ctx.Err() != nil {
				return
			}
			value := move.Report(id, sum)
			if err != nil {
				log.Error(err, "Verifying the source failed; trying again")
				value = move.Report(id, "error: "+err.Error())
			} else {
				log.Info("Verified the source", "sha256", sum)
			}
			if rerr := c.o.Reporter.Annotate(ctx, lv, move.AnnotationVerified, value); rerr != nil {
				log.Error(rerr, "Reporting the verification failed; trying again")
			} else if err == nil {
				return
			}
			t := c.o.Timers.NewTimer(backoff.Step())
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}()
}

// hash is the SHA-256 of the whole volume, read only while no publication of it stands.
func (c *Controller) hash(ctx context.Context, volumeID string) (string, error) {
	dev, pubs, err := c.o.Fence.Device(ctx, volumeID)
	if err != nil {
		return "", err
	}
	if len(pubs) > 0 {
		return "", fmt.Errorf("the volume is published at %s: it is not verified while a pod may write it", strings.Join(pubs, ", "))
	}
	r, size, closer, err := c.o.Open(dev)
	if err != nil {
		return "", err
	}
	defer closer.Close()
	return blockcopy.HashDevice(ctx, r, size)
}

func openFile(path string) (io.ReaderAt, int64, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, nil, err
	}
	return f, size, f, nil
}
