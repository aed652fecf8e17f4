package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/api"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// samples reads every YAML file under deploy/samples.
func samples(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "deploy", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// TestSamples_RoundTrip proves every sample decodes into the Go types with no unknown field and encodes back
// to the same document, so the samples and the types describe the same API.
func TestSamples_RoundTrip(t *testing.T) {
	scheme := api.NewScheme()
	for name, raw := range samples(t) {
		t.Run(name, func(t *testing.T) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			gvk := schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind)
			if gvk.Group == topolvmv1.LegacyGroupName {
				// The legacy group carries the same schema; decode it with the current types.
				gvk.Group = topolvmv1.GroupName
			}
			obj, err := scheme.New(gvk)
			if err != nil {
				t.Fatalf("sample kind %s is not a known type: %v", gvk, err)
			}
			if err := yaml.UnmarshalStrict(raw, obj); err != nil {
				t.Fatalf("sample does not decode strictly into %T: %v", obj, err)
			}
			encoded, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var want, got map[string]any
			if err := yaml.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(encoded, &got); err != nil {
				t.Fatal(err)
			}
			want["apiVersion"], got["apiVersion"] = nil, nil
			pruneEmpty(got)
			if !reflect.DeepEqual(normalise(t, want), normalise(t, got)) {
				t.Fatalf("round trip changed the sample\nwant: %s\ngot:  %s", mustJSON(want), mustJSON(got))
			}
		})
	}
}

// pruneEmpty drops the empty objects Go's encoder writes for non-pointer structs (status: {}, metadata
// creationTimestamp: null), which carry no information.
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		switch vv := v.(type) {
		case map[string]any:
			pruneEmpty(vv)
			if len(vv) == 0 {
				delete(m, k)
			}
		case nil:
			if k != "apiVersion" {
				delete(m, k)
			}
		}
	}
}

// normalise re-encodes through JSON so numbers and quantities compare by value.
func normalise(t *testing.T, m map[string]any) any {
	var out any
	if err := json.Unmarshal(mustJSON(m), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	_ = enc.Encode(v)
	return buf.Bytes()
}

var _ runtime.Object = &topolvmv1.LogicalVolume{}
