package plan_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/migrate/plan"
)

// planCase is one LVMCluster file and what its plan must contain besides the golden output.
type planCase struct {
	name  string
	input string
	// wantSets are the LVMNodeSet names, sorted.
	wantSets []string
	// wantCodes are the finding codes, in the plan's order.
	wantCodes []plan.Code
	wantLossy bool
	// wantErr is part of the refusal for a cluster that cannot be planned.
	wantErr string
}

var samples = filepath.Join("..", "..", "deploy", "samples")

var cases = []planCase{
	{name: "sample", input: filepath.Join(samples, "lvm_v1alpha1_lvmcluster.yaml"),
		wantSets: []string{"my-lvmcluster-bulk", "my-lvmcluster-vg1"}, wantLossy: true,
		wantCodes: []plan.Code{plan.CodeOptionalPathsNoMinimum, plan.CodePathsNotRequired, plan.CodePathsNotRequired}},
	{name: "sample-shared", input: filepath.Join(samples, "lvm_v1alpha1_lvmcluster_shared.yaml"),
		wantSets:  []string{"san"},
		wantCodes: []plan.Code{plan.CodeImplicitDefault, plan.CodeSharedVolumeGroup}},
	{name: "sample-external", input: filepath.Join(samples, "lvm_v1alpha1_lvmcluster_external.yaml"),
		wantErr: "spec.configurationPolicy is ExternalConfiguration"},
	{name: "seed", input: filepath.Join("testdata", "seed.yaml"),
		wantSets: []string{"my-lvmcluster"}, wantLossy: true,
		wantCodes: []plan.Code{plan.CodePathsNotRequired, plan.CodePathsNotRequired}},
	{name: "optional-paths", input: filepath.Join("testdata", "optional-paths.yaml"),
		wantSets: []string{"edge"}, wantLossy: true,
		wantCodes: []plan.Code{plan.CodeImplicitDefault, plan.CodeForceWipeNotCarried, plan.CodeOptionalPathsNoMinimum}},
	{name: "tolerations-two-sets", input: filepath.Join("testdata", "tolerations-two-sets.yaml"),
		wantSets: []string{"lvmcluster-cp", "lvmcluster-ssd"}, wantLossy: true,
		wantCodes: []plan.Code{plan.CodePathsNotRequired, plan.CodePathsNotRequired}},
	{name: "shared-selector", input: filepath.Join("testdata", "shared-selector.yaml"),
		wantSets: []string{"storage"}, wantLossy: true,
		wantCodes: []plan.Code{plan.CodePathsNotRequired, plan.CodePathsNotRequired, plan.CodePathsNotRequired}},
	{name: "single-all-devices", input: filepath.Join("testdata", "single-all-devices.yaml"),
		wantSets: []string{"simple"}, wantCodes: []plan.Code{plan.CodeImplicitDefault}},
	{name: "no-v2-equivalent", input: filepath.Join("testdata", "no-v2-equivalent.yaml"),
		wantSets: []string{"legacy-mirrored", "legacy-scratch"}, wantLossy: true,
		wantCodes: []plan.Code{plan.CodeDefaultClassChanges, plan.CodePathsNotRequired, plan.CodeClassTaken, plan.CodeRAIDNotSupported,
			plan.CodeStorageClassLabelsNotSupported, plan.CodeStaticDiscoveryNotSupported, plan.CodeSelectsNoNode}},
	{name: "split", input: filepath.Join("testdata", "split.yaml"),
		wantSets: []string{"many-dc1", "many-dc9"}, wantLossy: true,
		wantCodes: slices.Concat([]plan.Code{plan.CodeNodeSetSplit}, slices.Repeat([]plan.Code{plan.CodePathsNotRequired}, 9))},
	{name: "invalid", input: filepath.Join("testdata", "invalid.yaml"),
		wantErr: `spec.storage.deviceClasses[1].name "a" is also the name of deviceClasses[0]`},
}

// build plans the only LVMCluster of a file, with the file's classes as the cluster's.
func build(t *testing.T, path string) (*plan.Plan, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := plan.Decode(data)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	c, err := plan.Select(objs.Clusters, "", path)
	if err != nil {
		t.Fatal(err)
	}
	return plan.Build(plan.Input{Cluster: c, Existing: objs.Existing()})
}

func TestBuild_Golden(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := build(t, tc.input)
			if tc.wantErr != "" {
				var invalid *plan.InvalidError
				if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want an *InvalidError containing %q", err, tc.wantErr)
				}
				golden(t, tc.name+".txt", "error: "+err.Error()+"\n")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var text bytes.Buffer
			if err := plan.WriteText(&text, p); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".txt", text.String())
			out, err := plan.YAML(p)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".yaml", string(out))

			var sets, codes []string
			for _, s := range p.NodeSets {
				sets = append(sets, s.Name)
			}
			for _, f := range p.Findings {
				codes = append(codes, string(f.Code))
			}
			if !slices.Equal(sets, tc.wantSets) {
				t.Errorf("sets %v, want %v", sets, tc.wantSets)
			}
			if want := strings.Join(slicesOf(tc.wantCodes), " "); strings.Join(codes, " ") != want {
				t.Errorf("findings %v, want %s", codes, want)
			}
			if p.Lossy() != tc.wantLossy {
				t.Errorf("Lossy() = %v, want %v", p.Lossy(), tc.wantLossy)
			}
			if err := checkInvariants(clusterOf(t, tc.input), p); err != nil {
				t.Error(err)
			}
			if got := decodeSets(t, out); !equality.Semantic.DeepEqual(got, p.NodeSets) {
				t.Errorf("the YAML does not decode into the planned sets:\n%s", out)
			}
		})
	}
}

// TestYAMLAndJSON_SameObjects: -o json's List holds the objects -o yaml prints.
func TestYAMLAndJSON_SameObjects(t *testing.T) {
	p, err := build(t, filepath.Join("testdata", "tolerations-two-sets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	y, err := plan.YAML(p)
	if err != nil {
		t.Fatal(err)
	}
	j, err := plan.JSON(p)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		APIVersion string             `json:"apiVersion"`
		Kind       string             `json:"kind"`
		Metadata   map[string]any     `json:"metadata"`
		Items      []lvmv2.LVMNodeSet `json:"items"`
	}
	if err := yaml.UnmarshalStrict(j, &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("JSON is %s %s, want a v1 List", list.APIVersion, list.Kind)
	}
	if !equality.Semantic.DeepEqual(list.Items, decodeSets(t, y)) {
		t.Errorf("JSON items differ from the YAML documents:\n%s\n%s", j, y)
	}
}

// TestBuild_Deterministic: the same LVMCluster with its device classes and selectors in another order gives
// the same objects (the findings' field paths follow the input's order, so only the objects are compared).
func TestBuild_Deterministic(t *testing.T) {
	p1, err := build(t, filepath.Join("testdata", "seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join("testdata", "seed.yaml"))
	objs, err := plan.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	c := &objs.Clusters[0]
	slices.Reverse(c.Spec.Storage.DeviceClasses)
	for _, dc := range c.Spec.Storage.DeviceClasses {
		slices.Reverse(dc.NodeSelector.NodeSelectorTerms)
	}
	p2, err := plan.Build(plan.Input{Cluster: c, Existing: objs.Existing()})
	if err != nil {
		t.Fatal(err)
	}
	y1, _ := plan.JSON(p1)
	y2, _ := plan.JSON(p2)
	if !bytes.Equal(y1, y2) {
		t.Errorf("reordering the LVMCluster changed the plan:\n%s\n---- vs ----\n%s", y1, y2)
	}
}

func clusterOf(t *testing.T, path string) *lvmv1.LVMCluster {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := plan.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return &objs.Clusters[0]
}

// decodeSets reads multi-document YAML strictly into LVMNodeSets.
func decodeSets(t *testing.T, data []byte) []lvmv2.LVMNodeSet {
	t.Helper()
	var out []lvmv2.LVMNodeSet
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var s lvmv2.LVMNodeSet
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			t.Fatalf("decode %s: %v", doc, err)
		}
		out = append(out, s)
	}
	return out
}

// stripComments drops YAML comment lines.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

func slicesOf(codes []plan.Code) []string {
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = string(c)
	}
	return out
}

// golden compares got with testdata/golden/name; LVMS_UPDATE_RECORDINGS=1 rewrites it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if os.Getenv("LVMS_UPDATE_RECORDINGS") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (LVMS_UPDATE_RECORDINGS=1 go test ./migrate/plan creates it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (LVMS_UPDATE_RECORDINGS=1 go test ./migrate/plan rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
