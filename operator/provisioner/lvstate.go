package provisioner

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// LogicalVolume states as the lvms_logical_volumes metric labels them.
const (
	lvPending  = "pending"  // no volume ID and no error yet: the node agent has not created the LV
	lvReady    = "ready"    // the LV exists (volume ID set, code OK)
	lvFailed   = "failed"   // the node agent reported an error code
	lvDeleting = "deleting" // deletion requested, the node agent has not removed the LV yet
)

var (
	lvCountDesc = prometheus.NewDesc("lvms_logical_volumes",
		"LogicalVolumes by node, device class and state (pending, ready, failed, deleting).",
		[]string{"node", "device_class", "state"}, nil)
	lvOldestDesc = prometheus.NewDesc("lvms_logical_volume_oldest_timestamp_seconds",
		"When the oldest LogicalVolume still in a waiting state entered it: creation for pending and failed, deletion for deleting. `time() - this` is how long it has waited.",
		[]string{"node", "device_class", "state"}, nil)
)

// lvStateCollector reports the LogicalVolumes in the operator's cache at scrape time: counts, and for the
// states that should pass, since when the oldest one waits (alert LogicalVolumeStuck). Timestamps come from
// the objects, so nothing here reads a clock.
type lvStateCollector struct {
	p *Provisioner
}

func (c lvStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lvCountDesc
	ch <- lvOldestDesc
}

func (c lvStateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list topolvmv1.LogicalVolumeList
	if err := c.p.client.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(lvCountDesc, err)
		return
	}
	type key struct{ node, class, state string }
	counts := map[key]int{}
	oldest := map[key]time.Time{}
	for i := range list.Items {
		lv := &list.Items[i]
		state, since := lvState(lv)
		k := key{lv.Spec.NodeName, lv.Spec.DeviceClass, state}
		counts[k]++
		if state != lvReady {
			if t, ok := oldest[k]; !ok || since.Before(t) {
				oldest[k] = since
			}
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(lvCountDesc, prometheus.GaugeValue, float64(n), k.node, k.class, k.state)
	}
	for k, t := range oldest {
		ch <- prometheus.MustNewConstMetric(lvOldestDesc, prometheus.GaugeValue, float64(t.Unix()), k.node, k.class, k.state)
	}
}

// lvState is lv's state and since when it is in it (zero for ready).
func lvState(lv *topolvmv1.LogicalVolume) (string, time.Time) {
	switch {
	case lv.DeletionTimestamp != nil:
		return lvDeleting, lv.DeletionTimestamp.Time
	case lv.Status.Code != 0:
		return lvFailed, lv.CreationTimestamp.Time
	case lv.Status.VolumeID == "":
		return lvPending, lv.CreationTimestamp.Time
	}
	return lvReady, time.Time{}
}
