package v1alpha1

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// NodeFactsAnnotation on an LVMVolumeGroupNodeStatus holds what the node agent knows beyond LVMS's status
// shape, which v1alpha1 keeps unchanged for compatibility: every device's stable links and every volume
// group's size, as JSON (NodeFacts). The console reads it to name disks and report capacity on v1 nodes.
const NodeFactsAnnotation = "lvm.topolvm.io/node-facts"

// NodeFacts is the content of NodeFactsAnnotation.
type NodeFacts struct {
	// Devices maps a device's kernel name to its /dev/disk/by-id and by-path links.
	Devices map[string][]string `json:"devices,omitempty"`
	// VolumeGroups maps a volume group's name to its size and free space.
	VolumeGroups map[string]VolumeGroupFacts `json:"volumeGroups,omitempty"`
}

// VolumeGroupFacts are a volume group's size and free space.
type VolumeGroupFacts struct {
	Size *resource.Quantity `json:"size,omitempty"`
	Free *resource.Quantity `json:"free,omitempty"`
}

// ParseNodeFacts reads NodeFactsAnnotation; an absent annotation is empty facts.
func ParseNodeFacts(annotations map[string]string) (NodeFacts, error) {
	var f NodeFacts
	v, ok := annotations[NodeFactsAnnotation]
	if !ok || v == "" {
		return f, nil
	}
	if err := json.Unmarshal([]byte(v), &f); err != nil {
		return NodeFacts{}, fmt.Errorf("annotation %s is not valid JSON: %w", NodeFactsAnnotation, err)
	}
	return f, nil
}

// String is the annotation's value (JSON with sorted keys, so equal facts give equal strings).
func (f NodeFacts) String() string {
	b, _ := json.Marshal(f) // maps of strings and quantities always marshal
	return string(b)
}
