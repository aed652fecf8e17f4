package console

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// capacityAnnotationPrefix is TopoLVM's node annotation with the free bytes of a device class.
const capacityAnnotationPrefix = "capacity.topolvm.io/"

// capacityOf computes a device class's capacity on a node from what the agent reported: the volume group's
// size and free space for thick classes, the pool's size and data usage for thin ones; provisioned is the sum
// of the LogicalVolumes on the node's device class.
func (x *index) capacityOf(node, dc string, isDefault, thin bool, vg *actualVG, pool string) *Capacity {
	c := &Capacity{DeviceClass: dc, Node: node, Strategy: "Thick", Nodes: 1}
	if thin {
		c.Strategy = "Thin"
	}
	var prov int64
	for _, lv := range x.lvsByNode[node] {
		if lv.Spec.DeviceClass == dc || (lv.Spec.DeviceClass == "" && isDefault) {
			prov += lv.Spec.Size.Value()
		}
	}
	c.Provisioned = mkBytes(prov)
	switch {
	case vg == nil:
		c.Reason = "the node agent reports no volume group for this device class"
	case thin:
		for _, v := range vg.volumes {
			if v.Name != pool || v.Size == nil {
				continue
			}
			size := v.Size.Value()
			c.Size, c.Known, c.From = mkBytes(size), true, "thin pool "+pool
			if p := percent(v.DataPercent); p != nil {
				used := int64(float64(size) * *p / 100)
				c.Used, c.Free = mkBytes(used), mkBytes(size-used)
			} else {
				c.Free = mkBytes(size)
			}
			c.Overprovisioned = prov > size
		}
		if !c.Known {
			c.Reason = "thin pool " + pool + " is not reported in volume group " + vg.name
			if vg.message != "" {
				c.Reason += " (" + vg.message + ")"
			}
		}
	case vg.size != nil:
		size, free := vg.size.Value(), int64(0)
		if vg.free != nil {
			free = vg.free.Value()
		}
		c.Size, c.Free, c.Used, c.Known, c.From = mkBytes(size), mkBytes(free), mkBytes(size-free), true, "volume group "+vg.name
	default:
		c.Reason = "the status of volume group " + vg.name + " carries no size (a v1alpha1 status without the node agent's " +
			"lvm.topolvm.io/node-facts annotation)"
	}
	if !c.Known {
		if n, ok := x.nodes[node]; ok {
			if q, err := resource.ParseQuantity(n.Annotations[capacityAnnotationPrefix+dc]); err == nil {
				c.Free, c.From = mkBytes(q.Value()), "capacity annotation "+capacityAnnotationPrefix+dc
			} else if sc, free, ok := x.publishedCapacity(n, dc); ok {
				c.Free, c.From = mkBytes(free), "CSIStorageCapacity of StorageClass "+sc
			} else {
				c.Reason += ", and neither a " + capacityAnnotationPrefix + dc + " annotation on the Node nor a CSIStorageCapacity for it exists"
			}
		}
	}
	return c
}

// usableOnly is the one rule for whether a device class's free space on a node is usable: only where the
// class is ready (the state every view shows for it: Ready in v1alpha1, Healthy in v2alpha1). Elsewhere no
// volume can be provisioned, so its free space is moved to Unusable with the class's state and message.
func usableOnly(c *Capacity, state, message string) {
	if c == nil || stateHealth(state) == HealthOK || c.Free.Value == 0 {
		return
	}
	why := message
	switch {
	case state == stateNotReported:
		why = "the node agent has not reported the device class"
	case why == "":
		why = "the device class is " + state
	}
	c.Unusable, c.Free = c.Free, mkBytes(0)
	c.UnusableReason = c.Node + ": " + why
}

// addCapacity sums capacities of one device class over nodes.
func addCapacity(sum, c Capacity) Capacity {
	sum.Size = mkBytes(sum.Size.Value + c.Size.Value)
	sum.Used = mkBytes(sum.Used.Value + c.Used.Value)
	sum.Free = mkBytes(sum.Free.Value + c.Free.Value)
	sum.Unusable = mkBytes(sum.Unusable.Value + c.Unusable.Value)
	if c.UnusableReason != "" {
		sum.UnusableReason = strings.TrimPrefix(sum.UnusableReason+"; "+c.UnusableReason, "; ")
	}
	sum.Provisioned = mkBytes(sum.Provisioned.Value + c.Provisioned.Value)
	sum.Known = sum.Known || c.Known
	sum.Overprovisioned = sum.Overprovisioned || c.Overprovisioned
	sum.Nodes += c.Nodes
	return sum
}

// thinPoolName returns the pool of a thin v2alpha1 device class.
func thinPoolName(dc lvmv2.DeviceClass) string {
	if dc.Thin == nil {
		return ""
	}
	return dc.Thin.PoolName
}

// Text is the capacity in one line, as the web console and the TUI show it: the figures and where they come
// from, or why the size is not known.
func (c Capacity) Text() string {
	if !c.Known {
		s := "size not known"
		if c.Reason != "" {
			s += ": " + c.Reason
		}
		if c.Free.Value > 0 {
			s += "; " + c.Free.Human + " free"
			if c.From != "" {
				s += " (" + c.From + ")"
			}
		}
		return s + c.unusableText("; ") + "; " + c.Provisioned.Human + " provisioned"
	}
	s := c.Used.Human + " used of " + c.Size.Human + ", " + c.Free.Human + " free" + c.unusableText(", ") + ", " + c.Provisioned.Human + " provisioned"
	if c.Overprovisioned {
		s += " (overprovisioned)"
	}
	return s
}

// MarshalJSON adds the capacity's sentence (Text) as "text": every client of the JSON API (the plugin, a
// script) can say it as the console does, instead of reassembling it from the numbers.
func (c Capacity) MarshalJSON() ([]byte, error) {
	type plain Capacity // without this method
	return json.Marshal(struct {
		plain
		Text string `json:"text"`
	}{plain(c), c.Text()})
}

func (c Capacity) unusableText(sep string) string {
	if c.Unusable.Value == 0 {
		return ""
	}
	return sep + c.Unusable.Human + " not usable (" + c.UnusableReason + ")"
}

// publishedCapacity is the free space a CSIStorageCapacity publishes for the device class on the node: one
// for a StorageClass of that device class whose node topology selects the node.
func (x *index) publishedCapacity(node *corev1.Node, dc string) (string, int64, bool) {
	for i := range x.s.StorageCapacities {
		c := &x.s.StorageCapacities[i]
		sc, ok := x.scs[c.StorageClassName]
		if !ok || c.Capacity == nil || !classServes(sc, dc) {
			continue
		}
		if c.NodeTopology != nil {
			sel, err := metav1.LabelSelectorAsSelector(c.NodeTopology)
			if err != nil || !sel.Matches(labels.Set(node.Labels)) {
				continue
			}
		}
		return c.StorageClassName, c.Capacity.Value(), true
	}
	return "", 0, false
}

// classServes reports whether a StorageClass provisions from device class dc (TopoLVM's parameter, under
// either driver name).
func classServes(sc *storagev1.StorageClass, dc string) bool { return deviceClassOf(sc) == dc }
