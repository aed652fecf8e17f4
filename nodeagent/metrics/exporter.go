package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
)

// Exporter follows lvmd's Watch stream for one node.
type Exporter struct {
	client   client.Client
	lvmd     lvmdapi.Client
	nodeName string
	names    driver.Names

	vgAvailable, vgSize                           *prometheus.GaugeVec
	poolSize, poolData, poolMeta, poolOverprovAvl *prometheus.GaugeVec
	poolDataThreshold, poolMetaThreshold          *prometheus.GaugeVec

	// Config is lvmd.yaml, for the pools' usage thresholds (nil: the defaults).
	Config lvmdapi.ConfigFunc
	// Events, when set, receives a Warning event on the Node each time a thin pool's data or metadata
	// usage rises to nearly full or full (poolalarm.go).
	Events events.EventRecorder

	mu     sync.Mutex
	alarms poolAlarms
}

// NewExporter returns an exporter for nodeName.
func NewExporter(c client.Client, lvmd lvmdapi.Client, nodeName string, names driver.Names) *Exporter {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "topolvm", Name: name, Help: help,
			ConstLabels: prometheus.Labels{"node": nodeName}}, []string{"device_class"})
	}
	return &Exporter{client: c, lvmd: lvmd, nodeName: nodeName, names: names,
		vgAvailable:     gauge("volumegroup_available_bytes", "LVM VG available bytes under lvmd management"),
		vgSize:          gauge("volumegroup_size_bytes", "LVM VG size bytes under lvmd management"),
		poolSize:        gauge("thinpool_size_bytes", "LVM thin pool size bytes"),
		poolData:        gauge("thinpool_data_percent", "LVM thin pool data usage percent"),
		poolMeta:        gauge("thinpool_metadata_percent", "LVM thin pool metadata usage percent"),
		poolOverprovAvl: gauge("thinpool_overprovisioned_available", "LVM thin pool bytes available with overprovisioning"),
		poolDataThreshold: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "lvms", Name: "thinpool_data_usage_threshold_percent",
			Help: "Thin pool data usage percent at which no new volume is placed on the pool", ConstLabels: prometheus.Labels{"node": nodeName}}, []string{"device_class"}),
		poolMetaThreshold: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "lvms", Name: "thinpool_metadata_usage_threshold_percent",
			Help: "Thin pool metadata usage percent at which no new volume is placed on the pool", ConstLabels: prometheus.Labels{"node": nodeName}}, []string{"device_class"}),
		alarms: poolAlarms{},
	}
}

// Collectors are the exporter's gauges.
func (e *Exporter) Collectors() []prometheus.Collector {
	return []prometheus.Collector{e.vgAvailable, e.vgSize, e.poolSize, e.poolData, e.poolMeta, e.poolOverprovAvl,
		e.poolDataThreshold, e.poolMetaThreshold}
}

// Register registers the gauges (for example with controller-runtime's metrics.Registry).
func (e *Exporter) Register(r prometheus.Registerer) error {
	for _, c := range e.Collectors() {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

// Run follows the Watch stream until ctx ends, reconnecting after errors.
func (e *Exporter) Run(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithValues("node", e.nodeName)
	delay := time.Second
	last := ""
	for ctx.Err() == nil {
		err := e.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		// The same failure again (a node with only shared volume groups has no lvmd.yaml at all) is said
		// once, then only at debug level.
		if err.Error() != last {
			log.Info("Lost lvmd's capacity stream; retrying", "error", err.Error(), "after", delay)
		} else {
			log.V(1).Info("Lost lvmd's capacity stream; retrying", "error", err.Error(), "after", delay)
		}
		last = err.Error()
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Minute)
	}
	return nil
}

func (e *Exporter) follow(ctx context.Context) error {
	stream, err := e.lvmd.Watch(ctx, &proto.Empty{})
	if err != nil {
		return fmt.Errorf("watch lvmd: %w", err)
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("receive from lvmd: %w", err)
		}
		e.Observe(msg)
		if err := e.Annotate(ctx, msg); err != nil {
			return err
		}
	}
}

// Observe sets the gauges from one Watch message and records the thin pools' usage events.
func (e *Exporter) Observe(msg *proto.WatchResponse) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, it := range msg.GetItems() {
		dc := it.GetDeviceClass()
		e.vgAvailable.WithLabelValues(dc).Set(float64(it.GetFreeBytes()))
		e.vgSize.WithLabelValues(dc).Set(float64(it.GetSizeBytes()))
		if tp := it.GetThinPool(); tp != nil {
			e.poolSize.WithLabelValues(dc).Set(float64(tp.GetSizeBytes()))
			e.poolData.WithLabelValues(dc).Set(tp.GetDataPercent())
			e.poolMeta.WithLabelValues(dc).Set(tp.GetMetadataPercent())
			e.poolOverprovAvl.WithLabelValues(dc).Set(float64(tp.GetOverprovisionBytes()))
			dataT, metaT, pool := thresholds(e.Config, dc)
			e.poolDataThreshold.WithLabelValues(dc).Set(dataT)
			e.poolMetaThreshold.WithLabelValues(dc).Set(metaT)
			for _, u := range []struct {
				kind            string
				used, threshold float64
			}{{"metadata", tp.GetMetadataPercent(), metaT}, {"data", tp.GetDataPercent(), dataT}} {
				if reason := e.alarms.observe(dc+"/"+u.kind, u.used, u.threshold); reason != "" && e.Events != nil {
					poolEvent(e.Events, e.nodeName, dc, pool, u.kind, reason, u.used, u.threshold)
				}
			}
		}
	}
}

// Annotations are the capacity annotations one Watch message yields.
func (e *Exporter) Annotations(msg *proto.WatchResponse) map[string]string {
	out := map[string]string{e.names.CapacityAnnotation(""): strconv.FormatUint(msg.GetFreeBytes(), 10)}
	for _, it := range msg.GetItems() {
		v := it.GetFreeBytes()
		if tp := it.GetThinPool(); tp != nil {
			v = tp.GetOverprovisionBytes()
		}
		out[e.names.CapacityAnnotation(it.GetDeviceClass())] = strconv.FormatUint(v, 10)
	}
	return out
}

// Annotate merge-patches the capacity annotations onto this node's Node (metadata only), unless the node
// is being deleted.
func (e *Exporter) Annotate(ctx context.Context, msg *proto.WatchResponse) error {
	node := &corev1.Node{}
	if err := e.client.Get(ctx, types.NamespacedName{Name: e.nodeName}, node); err != nil {
		return fmt.Errorf("get node %s: %w", e.nodeName, err)
	}
	if !node.DeletionTimestamp.IsZero() {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": e.Annotations(msg)}})
	if err != nil {
		return fmt.Errorf("encode capacity annotations: %w", err)
	}
	if err := e.client.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotate node %s with capacity: %w", e.nodeName, err)
	}
	return nil
}
