package provisioner

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// Metrics registers the provisioning latency histogram when set.
	Metrics prometheus.Registerer
}

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
	return &Provisioner{opts: opts, latency: newLatency()}
}

// SetupWithManager registers the claim, volume, node, snapshot and capacity controllers.
func (p *Provisioner) SetupWithManager(mgr ctrl.Manager) error {
	p.client = mgr.GetClient()
	p.reader = mgr.GetAPIReader()
	p.events = mgr.GetEventRecorder("lvms-provisioner")
	if p.opts.Metrics != nil {
		if err := p.opts.Metrics.Register(p.latency); err != nil {
			return fmt.Errorf("register provisioning latency: %w", err)
		}
	}
	if err := (&claimReconciler{p}).setup(mgr); err != nil {
		return err
	}
	if err := (&volumeReconciler{p}).setup(mgr); err != nil {
		return err
	}
	if err := (&nodeReconciler{p}).setup(mgr); err != nil {
		return err
	}
	if p.opts.Snapshots {
		if err := (&snapshotReconciler{p}).setup(mgr); err != nil {
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

// Latency is the provisioning latency histogram (also for benchmarks).
func (p *Provisioner) Latency() prometheus.Histogram { return p.latency }

func newLatency() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "lvms", Name: "volume_provisioning_seconds",
		Help:    "Time from a PVC's creation (or its selected-node annotation) to its PersistentVolume's creation.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	})
}
