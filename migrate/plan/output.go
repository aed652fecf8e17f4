package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/operator/names"
)

// YAML renders the sets as YAML documents ready for kubectl apply, after a comment header that lists the
// findings (comments keep the file apply-able).
func YAML(p *Plan) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# LVMNodeSets replacing LVMCluster %s/%s (lvms migrate plan).\n", p.Namespace, p.Name)
	fmt.Fprintf(&b, "# Each names the LVMCluster in %s; the nodes the LVMCluster manages stay with it\n", names.MigratedFromAnnotation)
	fmt.Fprintf(&b, "# until they are handed over (%s).\n", names.HandedOverNodesAnnotation)
	fmt.Fprintf(&b, "# %s\n", Verdict(p))
	for _, f := range p.Findings {
		fmt.Fprintf(&b, "#   [%s] %s at %s:\n", f.Severity, f.Code, f.Path)
		for _, line := range wrap(f.Message, wrapAt-6) {
			fmt.Fprintf(&b, "#       %s\n", line)
		}
	}
	objs, err := objects(p)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("encode LVMNodeSet as YAML: %w", err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes(), nil
}

// JSON renders the sets as a v1 List, as kubectl get -o json prints several objects.
func JSON(p *Plan) ([]byte, error) {
	objs, err := objects(p)
	if err != nil {
		return nil, err
	}
	if objs == nil {
		objs = []map[string]any{}
	}
	list := map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}, "items": objs}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the LVMNodeSets as JSON: %w", err)
	}
	return append(data, '\n'), nil
}

// objects are the sets as maps, without the empty status and creationTimestamp a typed object would print.
func objects(p *Plan) ([]map[string]any, error) {
	var out []map[string]any
	for i := range p.NodeSets {
		data, err := json.Marshal(&p.NodeSets[i])
		if err != nil {
			return nil, fmt.Errorf("encode LVMNodeSet %s: %w", p.NodeSets[i].Name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("encode LVMNodeSet %s: %w", p.NodeSets[i].Name, err)
		}
		delete(m, "status")
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		out = append(out, m)
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
