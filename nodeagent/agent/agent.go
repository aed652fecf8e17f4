package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/shared"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockd"
	"github.com/lvms-dev/lvms/nodeagent/uevent"
	"github.com/lvms-dev/lvms/nodeagent/volumegroup"
)

// Defaults of Options.
const (
	DefaultResync = 5 * time.Minute
	// DefaultEventResync is the slow reconcile while the kernel reports block device changes: it catches
	// what no uevent announces (LVM metadata another host wrote to a shared disk, thin pool usage in status).
	DefaultEventResync = 30 * time.Minute
	// ProgressResync is how soon the agent looks again while a volume group is still being set up.
	ProgressResync = 30 * time.Second
)

// Options configure one node agent.
type Options struct {
	// NodeName is the node the agent manages (and the name of its LVMNode and LVMVolumeGroupNodeStatus).
	NodeName string
	// Version is the agent's release, published with its facts.
	Version string
	// Namespace of the LVMS objects.
	Namespace string
	// Runner runs lsblk, wipefs, lvm2 and dmsetup: its prefix (nsenter into the host), environment and
	// LVM devices file scope the agent.
	Runner lvm.Runner
	// LVMDConfigPath is the lvmd.yaml the agent writes (or, with ExternalConfiguration, reads).
	LVMDConfigPath string
	// WipeRecordFile is the node's copy of the forced-wipe records (default lvms-wipes.json next to
	// lvmd.yaml, on the host).
	WipeRecordFile string
	// LVMDPollInterval is how often the lvmd.yaml watcher looks at the file (0: lvmd.DefaultPollInterval).
	LVMDPollInterval time.Duration
	// Resync is the slow periodic reconcile (default DefaultResync).
	Resync time.Duration
	// DeviceEvents listens to the kernel's block device events (nodeagent/uevent): a device added, removed
	// or changed starts a pass at once, and while events arrive the periodic reconcile is EventResync
	// instead of Resync. Without the kernel's events (no privilege) the agent falls back to Resync.
	DeviceEvents bool
	// EventResync is the slow periodic reconcile while device events are received (default
	// DefaultEventResync).
	EventResync time.Duration
	// Root is the file system root for /dev/disk links and /sys (default "/").
	Root string
	// MinDeviceSize overrides the smallest device used (default filter.DefaultMinSize).
	MinDeviceSize uint64
	// ForceExternal makes the agent read the host's lvmd.yaml as if an LVMCluster said
	// configurationPolicy: ExternalConfiguration (the DaemonSet passes it for MicroShift).
	ForceExternal bool
	// Clock tells the time (default the real clock; tests pass a fake).
	Clock clock.PassiveClock
	// Reader reads what the agent does not cache (PersistentVolumes); nil uses the client.
	Reader client.Reader
	// SanlockIOTimeout is the lock managers' sanlock I/O timeout in seconds (0: sanlock's 10 s).
	SanlockIOTimeout int
}

// Agent is one node's agent.
type Agent struct {
	c        client.Client
	reader   client.Reader
	shared   *shared.Node
	opts     Options
	disc     *blockdev.Discoverer
	engine   *volumegroup.Engine
	watcher  *lvmd.Watcher
	recorder recorder.EventRecorder

	deviceEvents atomic.Bool // the kernel's device events are being received
	mu           sync.Mutex
	caps         *lvm.Capabilities
	capsFor      []string
	capsAt       time.Time
	devicesReady bool
}

// New returns the agent for opts.NodeName. It does nothing until SetupWithManager and the manager runs.
func New(c client.Client, opts Options) (*Agent, error) {
	if opts.NodeName == "" {
		return nil, errors.New("node agent: the node name is empty; pass --node-name (or NODE_NAME)")
	}
	if opts.Namespace == "" {
		return nil, errors.New("node agent: the namespace is empty; pass --namespace")
	}
	if opts.LVMDConfigPath == "" {
		opts.LVMDConfigPath = lvmd.DefaultPath
	}
	if opts.WipeRecordFile == "" {
		opts.WipeRecordFile = filepath.Join(filepath.Dir(opts.LVMDConfigPath), "lvms-wipes.json")
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.EventResync <= 0 {
		opts.EventResync = DefaultEventResync
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	reader := opts.Reader
	if reader == nil {
		reader = c
	}
	a := &Agent{c: c, reader: reader, opts: opts, disc: &blockdev.Discoverer{Runner: opts.Runner, Root: opts.Root},
		watcher: lvmd.NewWatcher(opts.LVMDConfigPath, opts.LVMDPollInterval)}
	a.engine = &volumegroup.Engine{Runner: opts.Runner, Clock: opts.Clock}
	a.shared = &shared.Node{Client: uncached{Client: c, r: reader}, Namespace: opts.Namespace, Name: opts.NodeName, Runner: opts.Runner,
		Log: ctrl.Log.WithName("shared").WithValues("node", opts.NodeName), Lockd: lockd.Options{SanlockIOTimeout: opts.SanlockIOTimeout}}
	return a, nil
}

// Name is the agent's controller name, unique per node.
func (a *Agent) Name() string { return "nodeagent-" + a.opts.NodeName }

// Shared is the node's part of the shared volume groups, which the shared CSI driver's services use.
func (a *Agent) Shared() *shared.Node { return a.shared }

// Watcher is the agent's lvmd.yaml watcher: the lvmd and CSI services of the same process read the current
// configuration from it.
func (a *Agent) Watcher() *lvmd.Watcher { return a.watcher }

// SetupWithManager registers the agent's controller and its lvmd.yaml watcher with mgr.
func (a *Agent) SetupWithManager(mgr ctrl.Manager) error {
	a.recorder = mgr.GetEventRecorder(a.Name())
	if err := mgr.Add(manager.RunnableFunc(a.watcher.Run)); err != nil {
		return fmt.Errorf("node agent %s: add the lvmd.yaml watcher: %w", a.opts.NodeName, err)
	}
	if err := mgr.Add(manager.RunnableFunc(a.shared.Run)); err != nil {
		return fmt.Errorf("node agent %s: add the shared volume groups: %w", a.opts.NodeName, err)
	}
	self := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.opts.Namespace, Name: a.opts.NodeName}}
	toSelf := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{self}
	})
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == a.opts.Namespace })
	mine := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetName() == a.opts.NodeName && (o.GetNamespace() == a.opts.Namespace || o.GetNamespace() == "")
	})
	changes := make(chan event.GenericEvent, 1)
	go a.forwardLVMDChanges(changes)
	if a.opts.DeviceEvents {
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return a.listenDevices(ctx, changes) })); err != nil {
			return fmt.Errorf("node agent %s: add the device event listener: %w", a.opts.NodeName, err)
		}
	}
	// A shared volume staged or unstaged: publish where it is active.
	a.shared.Changed = func() {
		select {
		case changes <- event.GenericEvent{Object: &lvmv2.LVMNode{}}:
		default:
		}
	}
	return builder.ControllerManagedBy(mgr).
		Named(a.Name()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: ptr(true)}).
		Watches(&lvmv2.LVMNode{}, toSelf, builder.WithPredicates(mine, specOrDeletionChanged())).
		Watches(&lvmv1.LVMVolumeGroup{}, toSelf, builder.WithPredicates(inNamespace, specOrDeletionChanged())).
		Watches(&lvmv1.LVMCluster{}, toSelf, builder.WithPredicates(inNamespace, predicate.GenerationChangedPredicate{})).
		Watches(&lvmv1.LVMVolumeGroupNodeStatus{}, toSelf, builder.WithPredicates(mine, deletedOnly())).
		Watches(&corev1.Node{}, toSelf, builder.WithPredicates(mine, predicate.LabelChangedPredicate{})).
		WatchesRawSource(source.Channel(changes, toSelf)).
		Complete(a)
}

// forwardLVMDChanges turns lvmd.yaml changes into reconciles (ExternalConfiguration validates the file).
func (a *Agent) forwardLVMDChanges(out chan<- event.GenericEvent) {
	for range a.watcher.Changes() {
		select {
		case out <- event.GenericEvent{Object: &lvmv2.LVMNode{}}:
		default:
		}
	}
}

func ptr[T any](v T) *T { return &v }

// specOrDeletionChanged passes creations, deletions and updates that change the spec (generation) or
// start the deletion; status, annotation and finalizer writes (the agent's own) do not trigger a pass.
func specOrDeletionChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			(e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
	}}
}

func deletedOnly() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// Reconcile runs one pass for the node.
func (a *Agent) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("node", a.opts.NodeName))
	in, err := a.fetch(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := a.ensureFinalizers(ctx, in); err != nil {
		return reconcile.Result{}, err
	}
	pass, err := a.observeAndReconcile(ctx, in)
	if err != nil {
		return reconcile.Result{}, err
	}
	a.emitEvents(in, pass)
	if err := a.publish(ctx, in, pass); err != nil {
		return reconcile.Result{}, err
	}
	if err := a.releaseFinalizers(ctx, in, pass); err != nil {
		return reconcile.Result{}, err
	}
	if pass.progressing() {
		return reconcile.Result{RequeueAfter: min(ProgressResync, a.opts.Resync)}, nil
	}
	return reconcile.Result{RequeueAfter: a.resync()}, nil
}

// resync is the idle reconcile period: long while the kernel tells the agent about device changes.
func (a *Agent) resync() time.Duration {
	if a.deviceEvents.Load() {
		return a.opts.EventResync
	}
	return a.opts.Resync
}

// listenDevices turns the kernel's block device events into passes. It never fails the manager: without
// the kernel's events the agent keeps its periodic reconcile.
func (a *Agent) listenDevices(ctx context.Context, out chan<- event.GenericEvent) error {
	logger := log.FromContext(ctx).WithValues("node", a.opts.NodeName)
	l, err := uevent.Open()
	if err != nil {
		logger.Info("No kernel device events; looking for device changes every resync instead", "resync", a.opts.Resync, "reason", err.Error())
		return nil
	}
	a.deviceEvents.Store(true)
	defer a.deviceEvents.Store(false)
	err = l.Run(ctx, func(uevent.Event, error) {
		select {
		case out <- event.GenericEvent{Object: &lvmv2.LVMNode{}}:
		default: // a pass is already pending
		}
	})
	if err != nil {
		logger.Info("Kernel device events stopped; looking for device changes every resync instead", "resync", a.opts.Resync, "reason", err.Error())
	}
	return nil
}

// capabilities detects device-mapper targets once, and again while a needed one is missing.
func (a *Agent) capabilities(ctx context.Context, need []string) lvm.Capabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.caps != nil && a.caps.Has(need...) {
		return *a.caps
	}
	if a.caps != nil && slices.Equal(a.capsFor, need) && a.opts.Clock.Now().Sub(a.capsAt) < a.opts.Resync {
		// A missing target rarely appears on its own (a module load, a new kernel): look again on the
		// slow resync, not on every pass.
		return *a.caps
	}
	caps := a.opts.Runner.DetectCapabilities(ctx, need...)
	a.caps, a.capsFor, a.capsAt = &caps, slices.Clone(need), a.opts.Clock.Now()
	return caps
}

// ensureDevicesFile creates the agent's LVM devices file once: without it lvm2 would see every device.
func (a *Agent) ensureDevicesFile(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.devicesReady {
		return nil
	}
	if err := a.opts.Runner.EnsureDevicesFile(ctx); err != nil {
		return err
	}
	a.devicesReady = true
	return nil
}

// shortName keeps the name part of a qualified key within 63 characters.
func shortName(s string) string {
	if len(s) <= 63 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return s[:50] + "-" + hex.EncodeToString(sum[:])[:12]
}
