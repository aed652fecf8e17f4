package provisioner

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
)

// CSI is the part of the CSI controller service the provisioner calls.
type CSI interface {
	CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error)
	DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error)
	ControllerExpandVolume(context.Context, *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error)
	CreateSnapshot(context.Context, *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error)
	DeleteSnapshot(context.Context, *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error)
}

// Options configure the provisioner.
type Options struct {
	Names driver.Names
	// CSI is the controller service.
	CSI CSI
	// CapacityNamespace holds the CSIStorageCapacity objects (the operator's namespace). Empty disables
	// capacity publishing.
	CapacityNamespace string
	// Snapshots enables the snapshotter (needs the VolumeSnapshot CRDs).
	Snapshots bool
	// GroupCSI is the CSI GroupController service; set, it enables the group snapshotter (needs the
	// VolumeGroupSnapshot CRDs and the VolumeSnapshot ones).
	GroupCSI GroupCSI
	// Metrics registers the provisioning latency histogram when set.
	Metrics prometheus.Registerer
	// CallTimeout bounds each CSI call (create, delete, expand, snapshot): a node whose agent does not
	// answer costs one worker this long, then the object is retried with backoff. Zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// NodeLostGracePeriod is how long a node may be missing or NotReady before the volumes whose deletion
	// was asked for are released without its agent. Zero means DefaultNodeLostGracePeriod.
	NodeLostGracePeriod time.Duration
	// Clock decides the grace period; nil means the real clock.
	Clock clock.PassiveClock
	// Workers is how many objects each controller (claims, volumes, snapshots) handles at once, so one
	// slow node never holds up the others. Zero means DefaultWorkers.
	Workers int
	// InUseRetry is how soon a deletion or expansion refused because the volume is in use (a shared volume
	// active on a node) is tried again (zero: 30 s).
	InUseRetry time.Duration
	// Shared makes this the provisioner of the shared driver (shared.lvm.topolvm.io): no node topology,
	// ReadWriteMany for raw block volumes, no snapshots, capacity from SharedCapacity.
	Shared bool
	// SharedCapacity is the free space of a shared device class's volume group and the nodes in its
	// lockspace (the shared controller service's Capacity).
	SharedCapacity func(ctx context.Context, deviceClass string) (free int64, nodes []string, err error)
}

// Defaults for Options.
const (
	DefaultCallTimeout = 2 * time.Minute
	DefaultWorkers     = 4
	// DefaultNodeLostGracePeriod is longer than a reboot or a kubelet upgrade takes.
	DefaultNodeLostGracePeriod = 10 * time.Minute
)

// Provisioner holds the controllers.
type Provisioner struct {
	opts    Options
	client  client.Client
	reader  client.Reader
	events  recorder.EventRecorder
	latency prometheus.Histogram
}

// New returns a provisioner.
func New(opts Options) *Provisioner {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.NodeLostGracePeriod <= 0 {
		opts.NodeLostGracePeriod = DefaultNodeLostGracePeriod
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.InUseRetry <= 0 {
		opts.InUseRetry = retryAfter
	}
	if opts.CSI != nil {
		opts.CSI = deadlineCSI{opts.CSI, opts.CallTimeout}
	}
	return &Provisioner{opts: opts, latency: newLatency()}
}

// driver is the CSI driver (and StorageClass provisioner) this provisioner serves.
func (p *Provisioner) driver() string {
	if p.opts.Shared {
		return driver.SharedDriver
	}
	return p.opts.Names.Driver()
}

// named is a controller's name, unique when both drivers' provisioners run in one manager.
func (p *Provisioner) named(name string) string {
	if p.opts.Shared {
		return "shared-provisioner-" + name
	}
	return "provisioner-" + name
}

// controllerOptions are the options every controller of the provisioner runs with: several workers, and
// controller-runtime's default rate limiter, which requeues a failed object with exponential backoff.
func (p *Provisioner) controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: p.opts.Workers}
}

// deadlineCSI gives every CSI call its own deadline: the controller service waits for the node agent's
// answer until its context ends, and a reconcile's context never does.
type deadlineCSI struct {
	csi     CSI
	timeout time.Duration
}

func withDeadline[Req, Resp any](ctx context.Context, timeout time.Duration, call func(context.Context, Req) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return call(ctx, req)
}

func (d deadlineCSI) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return withDeadline(ctx, d.timeout, d.csi.CreateVolume, r)
}

func (d deadlineCSI) DeleteVolume(ctx context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return withDeadline(ctx, d.timeout, d.csi.DeleteVolume, r)
}

func (d deadlineCSI) ControllerExpandVolume(ctx context.Context, r *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	return withDeadline(ctx, d.timeout, d.csi.ControllerExpandVolume, r)
}

func (d deadlineCSI) CreateSnapshot(ctx context.Context, r *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	return withDeadline(ctx, d.timeout, d.csi.CreateSnapshot, r)
}

func (d deadlineCSI) DeleteSnapshot(ctx context.Context, r *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	return withDeadline(ctx, d.timeout, d.csi.DeleteSnapshot, r)
}

// SetupWithManager registers the claim, volume, node, snapshot and capacity controllers.
func (p *Provisioner) SetupWithManager(mgr ctrl.Manager) error {
	p.client = mgr.GetClient()
	p.reader = mgr.GetAPIReader()
	p.events = mgr.GetEventRecorder("lvms-provisioner")
	if p.opts.Metrics != nil {
		if err := p.opts.Metrics.Register(p.latency); err != nil {
			return fmt.Errorf("register the provisioner's metrics: %w", err)
		}
		// The LogicalVolume states are read from the manager's cache, so they are served only while it runs:
		// a collector left behind would block every scrape on a stopped cache.
		states := lvStateCollector{p: p}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			if err := p.opts.Metrics.Register(states); err != nil {
				return fmt.Errorf("register the LogicalVolume state metrics: %w", err)
			}
			<-ctx.Done()
			p.opts.Metrics.Unregister(states)
			return nil
		})); err != nil {
			return err
		}
	}
	if err := (&claimReconciler{p}).setup(mgr); err != nil {
		return err
	}
	if err := (&volumeReconciler{p}).setup(mgr); err != nil {
		return err
	}
	if !p.opts.Shared {
		// Shared volumes live on no node: a lost node loses none of them (its locks expire with sanlock's
		// host-dead time), and linear LVs have no snapshots.
		if err := (&nodeReconciler{p}).setup(mgr); err != nil {
			return err
		}
	}
	if p.opts.Snapshots && !p.opts.Shared {
		if err := (&snapshotReconciler{p}).setup(mgr); err != nil {
			return err
		}
	}
	if p.opts.Snapshots && p.opts.GroupCSI != nil && !p.opts.Shared {
		if err := (&groupSnapshotReconciler{p}).setup(mgr); err != nil {
			return err
		}
	}
	if p.opts.CapacityNamespace != "" {
		if err := (&capacityReconciler{p}).setup(mgr); err != nil {
			return err
		}
	}
	return nil
}

// Collectors are the provisioner's metrics: the provisioning latency and the LogicalVolumes' states (read
// from the manager's cache once SetupWithManager ran).
func (p *Provisioner) Collectors() []prometheus.Collector {
	// SetupWithManager registers the latency at once and the states while the manager runs.
	return []prometheus.Collector{p.latency, lvStateCollector{p: p}}
}

// Latency is the provisioning latency histogram (also for benchmarks).
func (p *Provisioner) Latency() prometheus.Histogram { return p.latency }

func newLatency() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "lvms", Name: "volume_provisioning_seconds",
		Help:    "Time from a PVC's creation (or its selected-node annotation) to its PersistentVolume's creation.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	})
}
