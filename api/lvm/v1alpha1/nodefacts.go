package v1alpha1

import (
	"encoding/json"
	"fmt"
	"slices"

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
	// Agent is the node agent that wrote the facts; nil from an agent older than the field.
	Agent *AgentFacts `json:"agent,omitempty"`
}

// AgentFacts say which node agent runs on the node and what it can do, so a migration can check before it
// starts instead of finding out on the node.
type AgentFacts struct {
	Version      string   `json:"version,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// CapabilityAdoptVolumeGroups: the agent takes over a volume group it finds tagged by LVMS as it is (no
// wipe, pvcreate or vgcreate), which a migration to LVMNodeSets relies on.
const CapabilityAdoptVolumeGroups = "AdoptVolumeGroups"

// Can reports whether the agent announced the capability.
func (a *AgentFacts) Can(capability string) bool {
	return a != nil && slices.Contains(a.Capabilities, capability)
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
