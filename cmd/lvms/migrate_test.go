package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/names"
)

var (
	planInputs = filepath.Join("..", "..", "migrate", "plan", "testdata")
	samplesDir = filepath.Join("..", "..", "deploy", "samples")
	exactFile  = filepath.Join(planInputs, "single-all-devices.yaml")
	lossyFile  = filepath.Join(samplesDir, "lvm_v1alpha1_lvmcluster.yaml")
)

// runSplit runs lvms with args and returns stdout, stderr and the exit code main would use.
func runSplit(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		errOut.WriteString("error: " + err.Error() + "\n")
		code = exitCode(err)
	}
	return out.String(), errOut.String(), code
}

func TestMigratePlan_ExitCodes(t *testing.T) {
	external := filepath.Join(samplesDir, "lvm_v1alpha1_lvmcluster_external.yaml")
	cases := []struct {
		name     string
		args     []string
		wantCode int
		// wantOut and wantErr must appear on stdout and stderr; noOut must not appear on stdout.
		wantOut, wantErr []string
		noOut            string
	}{
		{"exact plan", []string{"-f", exactFile}, 0,
			[]string{"Result: EXACT", "LVMNodeSet openshift-storage/simple", "[Note] ImplicitDefaultMadeExplicit"}, nil, ""},
		{"exact plan as YAML", []string{"-f", exactFile, "-o", "yaml"}, 0, []string{"kind: LVMNodeSet", "lvm.topolvm.io/migrated-from: simple"}, nil, ""},
		{"lossy plan", []string{"-f", lossyFile}, 3,
			[]string{"Result: LOSSY", "[Lossy] PathsNotRequired at spec.storage.deviceClasses[1].deviceSelector.paths"},
			[]string{"error: the plan is lossy: 3 mappings behave differently in v2alpha1", "--accept-lossy"}, ""},
		{"lossy plan as YAML prints no objects", []string{"-f", lossyFile, "-o", "yaml"}, 3, nil,
			[]string{"[Lossy] OptionalPathsNoMinimum", "the plan is lossy"}, "kind: LVMNodeSet"},
		{"lossy plan accepted", []string{"-f", lossyFile, "-o", "yaml", "--accept-lossy"}, 0,
			[]string{"#   [Lossy] OptionalPathsNoMinimum", "name: my-lvmcluster-vg1"}, nil, ""},
		{"lossy plan accepted as JSON", []string{"-f", lossyFile, "-o", "json", "--accept-lossy"}, 0,
			[]string{`"kind": "List"`, `"name": "my-lvmcluster-bulk"`}, []string{"[Lossy] PathsNotRequired"}, ""},
		{"stdin", []string{"-f", "-"}, 0, []string{"LVMNodeSet ns-from-flag/simple"}, nil, ""},
		{"stdin without -n", []string{"-f", "-"}, 0, []string{"LVMNodeSet openshift-storage/simple"}, nil, ""},
		{"refused cluster", []string{"-f", external}, 1, nil,
			[]string{"LVMCluster openshift-storage/lvms cannot be planned", "ExternalConfiguration"}, "LVMNodeSet"},
		{"missing file", []string{"-f", "nope.yaml"}, 1, nil, []string{"read nope.yaml"}, ""},
		{"unknown output", []string{"-f", exactFile, "-o", "xml"}, 1, nil, []string{`invalid argument "xml" for "-o, --output" flag: use text, yaml or json`}, ""},
		{"unknown cluster name", []string{"-f", exactFile, "other"}, 1, nil, []string{"no LVMCluster named other"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdin := ""
			args := append([]string{"migrate", "plan"}, tc.args...)
			if strings.HasPrefix(tc.name, "stdin") {
				data, err := os.ReadFile(exactFile)
				if err != nil {
					t.Fatal(err)
				}
				stdin = strings.Replace(string(data), "  namespace: openshift-storage\n", "", 1)
				if tc.name == "stdin" {
					args = append(args, "-n", "ns-from-flag")
				}
			}
			out, errOut, code := runSplit(t, stdin, args...)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out, errOut)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if tc.noOut != "" && strings.Contains(out, tc.noOut) {
				t.Errorf("stdout has %q:\n%s", tc.noOut, out)
			}
		})
	}
}

// TestMigratePlan_AgainstTheAPIServer: the YAML of every plan decodes into LVMNodeSets the real API server
// accepts (the v2 CRD's schema and CEL rules), and a plan read from the cluster sees its LVMCluster and
// StorageClasses.
func TestMigratePlan_AgainstTheAPIServer(t *testing.T) {
	testenv.Require(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()

	t.Run("YAML round trip", func(t *testing.T) {
		inputs, _ := filepath.Glob(filepath.Join(planInputs, "*.yaml"))
		inputs = append(inputs, filepath.Join(samplesDir, "lvm_v1alpha1_lvmcluster.yaml"), filepath.Join(samplesDir, "lvm_v1alpha1_lvmcluster_shared.yaml"))
		for _, in := range inputs {
			if strings.HasSuffix(in, "invalid.yaml") {
				continue
			}
			t.Run(filepath.Base(in), func(t *testing.T) {
				out, errOut, code := runSplit(t, "", "migrate", "plan", "-f", in, "-o", "yaml", "--accept-lossy")
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				ns := env.Namespace(t)
				sets := yamlObjects(t, out)
				if len(sets) == 0 {
					t.Fatalf("no objects in:\n%s", out)
				}
				for _, u := range sets {
					if u.GetAPIVersion() != "lvm.topolvm.io/v2alpha1" || u.GetKind() != "LVMNodeSet" {
						t.Errorf("object is %s %s", u.GetAPIVersion(), u.GetKind())
					}
					u.SetNamespace(ns)
					if err := env.Client.Create(ctx, u); err != nil {
						t.Errorf("the API server refused LVMNodeSet %s: %v", u.GetName(), err)
					}
				}
			})
		}
	})

	t.Run("from the cluster", func(t *testing.T) {
		ns := env.Namespace(t)
		var c lvmv1.LVMCluster
		data, err := os.ReadFile(filepath.Join(samplesDir, "lvm_v1alpha1_lvmcluster.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		c.Namespace = ns
		if err := env.Client.Create(ctx, &c); err != nil {
			t.Fatal(err)
		}
		other := storagev1.StorageClass{Provisioner: "example.com/nfs", ObjectMeta: metav1.ObjectMeta{Name: "nfs-" + ns,
			Annotations: map[string]string{names.DefaultClassAnnotation: "true"}}}
		if err := env.Client.Create(ctx, &other); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, &other) })
		kubeconfig := env.Kubeconfig(t)

		out, errOut, code := runSplit(t, "", "migrate", "plan", "--kubeconfig", kubeconfig, "-n", ns)
		if code != 3 {
			t.Fatalf("exit %d, want 3 (the sample is lossy):\n%s\n%s", code, out, errOut)
		}
		for _, want := range []string{"LVMNodeSet " + ns + "/my-lvmcluster-vg1", "[Note] StorageClassMissing", "[Note] SnapshotClassMissing",
			"[Note] DefaultHeldElsewhere", "StorageClass nfs-" + ns + " is the cluster's default"} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "were not checked") {
			t.Errorf("a plan from the cluster says the classes were not checked:\n%s", out)
		}

		_, errOut, code = runSplit(t, "", "migrate", "plan", "--kubeconfig", kubeconfig, "-n", ns, "nope")
		if code != 1 || !strings.Contains(errOut, "no LVMCluster named nope in namespace "+ns) {
			t.Errorf("unknown name: exit %d, %s", code, errOut)
		}
		_, errOut, code = runSplit(t, "", "migrate", "plan", "--kubeconfig", kubeconfig, "-n", "empty-"+ns)
		if code != 1 || !strings.Contains(errOut, "no LVMCluster in namespace empty-"+ns) {
			t.Errorf("empty namespace: exit %d, %s", code, errOut)
		}
	})
}

// yamlObjects splits multi-document YAML into objects, skipping comment-only documents.
func yamlObjects(t *testing.T, data string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("decode %s: %v", doc, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
