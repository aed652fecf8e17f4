package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/names"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// render runs kustomize in process (the library kubectl kustomize is built on), so the overlays are checked on
// machines without kubectl.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(testenv.RepoRoot(), "deploy", dir))
	if err != nil {
		t.Fatalf("kustomize build deploy/%s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build deploy/%s: %v", dir, err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decode %s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

func TestOverlays_RenderAndTheAPIServerAcceptsThem(t *testing.T) {
	testenv.Require(t)
	tests := []struct {
		dir           string
		wantNamespace string
		wantArgs      []string
		wantKinds     []string
		wantAbsent    []string // Kind/name
	}{
		{dir: "overlays/kubernetes", wantNamespace: "lvms-system", wantArgs: []string{"operator", "--leader-elect"}},
		{dir: "overlays/openshift", wantNamespace: "openshift-storage", wantArgs: []string{"--node-agent-priority-class=openshift-user-critical"},
			wantKinds: []string{"SecurityContextConstraints", "ConsolePlugin", "ServiceMonitor", "PrometheusRule"}},
		{dir: "overlays/prometheus-operator", wantNamespace: "lvms-system", wantArgs: []string{"operator", "--leader-elect"}, wantKinds: []string{"ServiceMonitor", "PrometheusRule"}},
		{dir: "overlays/microshift", wantNamespace: "openshift-storage", wantArgs: []string{"--lvmd-config-dir=/var/lib/microshift/lvms"}, wantKinds: []string{"LVMCluster", "SecurityContextConstraints"},
			wantAbsent: []string{"Service/lvms-operator-metrics", "ClusterRole/lvms-metrics-reader"}}, // the operator serves no metrics there
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			objs := render(t, tc.dir)
			kinds := map[string]*unstructured.Unstructured{}
			for _, o := range objs {
				kinds[o.GetKind()] = o
				if slices.Contains(tc.wantAbsent, o.GetKind()+"/"+o.GetName()) {
					t.Errorf("%s %s rendered: this overlay does not need it", o.GetKind(), o.GetName())
				}
				if ns := o.GetNamespace(); ns != "" && ns != tc.wantNamespace {
					t.Errorf("%s %s in namespace %s, want %s", o.GetKind(), o.GetName(), ns, tc.wantNamespace)
				}
			}
			for _, k := range append([]string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service",
				"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}, tc.wantKinds...) {
				if kinds[k] == nil {
					t.Errorf("no %s rendered", k)
				}
			}
			if ns := kinds["Namespace"]; ns == nil || ns.GetName() != tc.wantNamespace {
				t.Errorf("Namespace object = %v, want %s", ns, tc.wantNamespace)
			}
			var crb *unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == "ClusterRoleBinding" && o.GetName() == "lvms-operator" {
					crb = o
				}
			}
			subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
			if len(subjects) != 1 || subjects[0].(map[string]any)["namespace"] != tc.wantNamespace {
				t.Errorf("ClusterRoleBinding subjects = %v, want the operator's ServiceAccount in %s", subjects, tc.wantNamespace)
			}
			containers, _, _ := unstructured.NestedSlice(kinds["Deployment"].Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			args := strings.Join(toStrings(c["args"]), " ")
			for _, want := range tc.wantArgs {
				if !strings.Contains(args, want) {
					t.Errorf("operator args %q lack %q", args, want)
				}
			}
			// The node agent runs the operator Pod's own image (cmd/lvms ownImage): the manifests must not
			// pin another one, or an overlay's `kustomize edit set image` would change only the operator.
			podName, gogc := false, ""
			for _, e := range c["env"].([]any) {
				m := e.(map[string]any)
				if m["name"] == "GOGC" {
					gogc = fmt.Sprint(m["value"])
				}
				if m["name"] == "LVMS_IMAGE" {
					t.Errorf("the operator's env sets LVMS_IMAGE=%v: an overlay's image override would miss the node agent", m["value"])
				}
				podName = podName || (m["name"] == "POD_NAME" && fmt.Sprint(m["valueFrom"]) == "map[fieldRef:map[fieldPath:metadata.name]]")
			}
			if gogc != names.OperatorGOGC {
				t.Errorf("the operator's GOGC = %q, want %s (operator/names.OperatorGOGC, which the benchmarks run with)", gogc, names.OperatorGOGC)
			}
			if !podName {
				t.Errorf("the operator's env lacks POD_NAME from metadata.name: it finds the node agent's image through its Pod")
			}

			// The API server accepts every object (server-side dry run; the Namespace is created for real
			// because namespaced dry runs need it).
			ctx := context.Background()
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					if err := env.Client.Create(ctx, o.DeepCopy()); client.IgnoreAlreadyExists(err) != nil {
						t.Fatalf("create namespace: %v", err)
					}
					continue
				}
				switch o.GetKind() {
				case "SecurityContextConstraints", "ConsolePlugin", "ServiceMonitor", "PrometheusRule":
					continue // APIs the test's API server does not serve; the monitoring and console tests check them
				}
				if err := env.Client.Create(ctx, o.DeepCopy(), client.DryRunAll); err != nil {
					t.Errorf("the API server refuses %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
		})
	}
}

func toStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
