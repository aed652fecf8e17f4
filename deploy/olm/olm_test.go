package olm

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/web/plugin"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// committed reads bundle/ as committed.
func committed(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	dir := filepath.Join(testenv.RepoRoot(), "bundle")
	for _, sub := range []string{"manifests", "metadata"} {
		paths, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[sub+"/"+filepath.Base(p)] = b
		}
	}
	return out
}

func TestBundle_IsWhatDeployGenerates(t *testing.T) {
	want, err := Generate(Options{Root: testenv.RepoRoot(), Version: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	got := committed(t)
	for name, b := range want {
		if string(got[name]) != string(b) {
			t.Errorf("bundle/%s differs from what deploy/ generates: run `make generate` and commit", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("bundle/%s is stale: run `make generate`", name)
		}
	}
}

func readCSV(t *testing.T) (*CSV, map[string]any) {
	t.Helper()
	b := committed(t)["manifests/"+PackageName+".clusterserviceversion.yaml"]
	var csv CSV
	if err := yaml.UnmarshalStrict(b, &csv); err != nil {
		t.Fatalf("CSV: %v", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	return &csv, raw
}

// The rules OLM's registry and the console enforce on a CSV that can be checked without them.
func TestCSV_HasWhatOLMRequires(t *testing.T) {
	csv, raw := readCSV(t)
	if csv.APIVersion != "operators.coreos.com/v1alpha1" || csv.Kind != "ClusterServiceVersion" {
		t.Errorf("type %s %s", csv.APIVersion, csv.Kind)
	}
	v, err := version.ParseSemantic(csv.Spec.Version)
	if err != nil {
		t.Errorf("spec.version %q is not semver: %v", csv.Spec.Version, err)
	} else if csv.Metadata.Name != PackageName+".v"+v.String() {
		t.Errorf("metadata.name %q, want %s.v%s", csv.Metadata.Name, PackageName, v)
	}
	if _, err := version.ParseGeneric(csv.Spec.MinKubeVersion); err != nil {
		t.Errorf("minKubeVersion %q: %v", csv.Spec.MinKubeVersion, err)
	}
	for field, value := range map[string]string{"displayName": csv.Spec.DisplayName, "description": csv.Spec.Description,
		"maturity": csv.Spec.Maturity, "provider.name": csv.Spec.Provider.Name, "install.strategy": csv.Spec.Install.Strategy} {
		if value == "" {
			t.Errorf("spec.%s is empty", field)
		}
	}
	var modes []string
	for _, m := range csv.Spec.InstallModes {
		modes = append(modes, m.Type)
		if m.Type == "OwnNamespace" && !m.Supported {
			t.Error("OwnNamespace is not supported; the operator manages its own namespace")
		}
	}
	slices.Sort(modes)
	if !slices.Equal(modes, []string{"AllNamespaces", "MultiNamespace", "OwnNamespace", "SingleNamespace"}) {
		t.Errorf("installModes %v, want each of the four once", modes)
	}
	if len(csv.Spec.Install.Spec.Deployments) != 1 {
		t.Fatalf("%d deployments", len(csv.Spec.Install.Spec.Deployments))
	}
	dep := csv.Spec.Install.Spec.Deployments[0]
	sa := dep.Spec.Template.Spec.ServiceAccountName
	if !slices.ContainsFunc(csv.Spec.Install.Spec.ClusterPermissions, func(p Permission) bool { return p.ServiceAccountName == sa }) {
		t.Errorf("the Deployment runs as %s, which has no clusterPermissions (OLM creates only the accounts it lists)", sa)
	}
	image := dep.Spec.Template.Spec.Containers[0].Image
	if !slices.ContainsFunc(csv.Spec.RelatedImages, func(r RelatedImage) bool { return r.Image == image }) ||
		csv.Metadata.Annotations["containerImage"] != image {
		t.Errorf("image %s is not in relatedImages %v and containerImage %q", image, csv.Spec.RelatedImages, csv.Metadata.Annotations["containerImage"])
	}
	var plugins []string
	if err := json.Unmarshal([]byte(csv.Metadata.Annotations["console.openshift.io/plugins"]), &plugins); err != nil || !slices.Contains(plugins, plugin.Name) {
		t.Errorf("console.openshift.io/plugins = %q, want a JSON list with %s", csv.Metadata.Annotations["console.openshift.io/plugins"], plugin.Name)
	}
	spec := raw["spec"].(map[string]any)
	if _, ok := spec["replaces"]; ok {
		t.Error("the first version replaces nothing")
	}
	// metadata/annotations.yaml names the package and a default channel that is among the channels.
	var ann struct{ Annotations map[string]string }
	if err := yaml.UnmarshalStrict(committed(t)["metadata/annotations.yaml"], &ann); err != nil {
		t.Fatal(err)
	}
	a := ann.Annotations
	if a["operators.operatorframework.io.bundle.mediatype.v1"] != "registry+v1" || a["operators.operatorframework.io.bundle.package.v1"] != PackageName ||
		!slices.Contains(strings.Split(a["operators.operatorframework.io.bundle.channels.v1"], ","), a["operators.operatorframework.io.bundle.channel.default.v1"]) {
		t.Errorf("metadata/annotations.yaml: %v", a)
	}
}

// Owned CRDs are exactly deploy/crds's served versions, each with its CRD in the bundle; every manifest is a
// kind OLM's registry accepts, namespaced ones without a namespace; there is one CSV.
func TestBundle_OwnedCRDsAndManifests(t *testing.T) {
	csv, _ := readCSV(t)
	crds, _, err := readCRDs(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if v.Served {
				want = append(want, c.Name+"/"+v.Name+"/"+c.Spec.Names.Kind)
			}
		}
	}
	for _, o := range csv.Spec.CustomResourceDefinitions.Owned {
		got = append(got, o.Name+"/"+o.Version+"/"+o.Kind)
		if o.DisplayName == "" || o.Description == "" {
			t.Errorf("owned %s has no displayName or description", o.Name)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("owned CRDs\n got %v\nwant %v (deploy/crds)", got, want)
	}
	supported := map[string]bool{"ClusterServiceVersion": true, "CustomResourceDefinition": false, "Secret": true, "ClusterRole": false,
		"ClusterRoleBinding": false, "ConfigMap": true, "ServiceAccount": true, "Service": true, "Role": true, "RoleBinding": true,
		"PrometheusRule": true, "ServiceMonitor": true, "PodDisruptionBudget": true, "PriorityClass": false, "VerticalPodAutoscaler": true,
		"ConsoleYAMLSample": false, "ConsoleQuickStart": false, "ConsoleCLIDownload": false, "ConsoleLink": false, "ConsolePlugin": false,
		"NetworkPolicy": true} // kind -> namespaced, as the operator registry lists them
	crdFiles := map[string]bool{}
	csvs := 0
	for name, b := range committed(t) {
		if !strings.HasPrefix(name, "manifests/") {
			continue
		}
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		namespaced, ok := supported[u.GetKind()]
		switch {
		case !ok:
			t.Errorf("%s: OLM cannot install a %s from a bundle", name, u.GetKind())
		case u.GetNamespace() != "":
			t.Errorf("%s: namespace %q; OLM puts %s objects into the install namespace", name, u.GetNamespace(), u.GetKind())
		case !namespaced && u.GetKind() == "CustomResourceDefinition":
			crdFiles[u.GetName()] = true
		case u.GetKind() == "ClusterServiceVersion":
			csvs++
		}
	}
	if csvs != 1 {
		t.Errorf("%d CSVs in the bundle, want 1", csvs)
	}
	for _, o := range csv.Spec.CustomResourceDefinitions.Owned {
		if !crdFiles[o.Name] {
			t.Errorf("owned CRD %s is not in bundle/manifests", o.Name)
		}
	}
}

// Every alm-example is accepted by a real API server with the CRDs installed (server-side dry run).
func TestCSV_ExamplesAreAcceptedByTheAPIServer(t *testing.T) {
	testenv.Require(t)
	csv, _ := readCSV(t)
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.Metadata.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples is not a JSON list: %v", err)
	}
	if len(examples) == 0 {
		t.Fatal("no alm-examples")
	}
	ns := env.Namespace(t)
	kinds := map[string]bool{}
	for _, e := range examples {
		u := &unstructured.Unstructured{Object: e}
		kinds[u.GetKind()] = true
		u.SetNamespace(ns)
		if err := env.Client.Create(context.Background(), u, client.DryRunAll); err != nil {
			t.Errorf("the API server refuses the %s example %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, k := range []string{"LVMCluster", "LVMNodeSet"} {
		if !kinds[k] {
			t.Errorf("no %s example", k)
		}
	}
	for _, k := range internalKinds {
		if kinds[k] {
			t.Errorf("an example of %s, which only LVMS creates", k)
		}
	}
}

// The CSV grants each ServiceAccount exactly what deploy/'s OpenShift overlay grants it (cluster-wide and in
// the namespace), with the one substitution an OLM install needs: the privileged SCC for the node agent's.
func TestCSV_RBACIsExactlyDeploys(t *testing.T) {
	csv, _ := readCSV(t)
	objs, err := Render(filepath.Join(testenv.RepoRoot(), Overlay))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string][]rbacv1.PolicyRule{}
	for _, u := range objs {
		if u.GetKind() == "ClusterRole" || u.GetKind() == "Role" {
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				t.Fatal(err)
			}
			roles[u.GetKind()+"/"+u.GetName()] = r.Rules
		}
	}
	var want []string
	for _, u := range objs {
		if u.GetKind() != "ClusterRoleBinding" && u.GetKind() != "RoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Subjects {
			if s.Kind != "ServiceAccount" || !slices.Contains(components, s.Name) {
				continue
			}
			for _, r := range roles[b.RoleRef.Kind+"/"+b.RoleRef.Name] {
				want = append(want, lines(s.Name, u.GetKind() == "ClusterRoleBinding", r)...)
			}
		}
	}
	var got []string
	for _, p := range csv.Spec.Install.Spec.ClusterPermissions {
		for _, r := range p.Rules {
			got = append(got, lines(p.ServiceAccountName, true, r)...)
		}
	}
	for _, p := range csv.Spec.Install.Spec.Permissions {
		for _, r := range p.Rules {
			got = append(got, lines(p.ServiceAccountName, false, r)...)
		}
	}
	scc := regexp.MustCompile(`securitycontextconstraints (\S+) names=` + OverlaySCC + `$`)
	for i, l := range want {
		want[i] = scc.ReplaceAllString(l, "securitycontextconstraints $1 names="+BundleSCC)
	}
	slices.Sort(want)
	slices.Sort(got)
	want, got = slices.Compact(want), slices.Compact(got)
	if !slices.Equal(want, got) {
		t.Errorf("CSV permissions differ from deploy/:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	if !slices.ContainsFunc(got, func(l string) bool { return strings.HasSuffix(l, "names="+BundleSCC) }) {
		t.Error("the node agent may not use the privileged SCC in an OLM install")
	}
}

// lines are a rule as "account scope group/resource verb names", one per combination.
func lines(account string, cluster bool, r rbacv1.PolicyRule) []string {
	scope := "namespace"
	if cluster {
		scope = "cluster"
	}
	var out []string
	names := strings.Join(r.ResourceNames, ",")
	for _, u := range r.NonResourceURLs {
		for _, v := range r.Verbs {
			out = append(out, fmt.Sprintf("%s %s url:%s %s", account, scope, u, v))
		}
	}
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				out = append(out, fmt.Sprintf("%s %s %s/%s %s names=%s", account, scope, g, res, v, names))
			}
		}
	}
	return out
}

// The bundle image carries bundle/ under /manifests and /metadata and the annotations as labels.
func TestBundleImage_HoldsTheBundleAndItsLabels(t *testing.T) {
	img, n, err := Image(filepath.Join(testenv.RepoRoot(), "bundle"), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range Annotations() {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	layers, _ := img.Layers()
	if len(layers) != 1 {
		t.Fatalf("%d layers", len(layers))
	}
	rc, _ := layers[0].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		if h.Typeflag == tar.TypeReg {
			names = append(names, h.Name)
		}
	}
	if len(names) != n || len(committed(t)) != n {
		t.Errorf("%d files in the image, %d reported, %d in bundle/", len(names), n, len(committed(t)))
	}
	for _, want := range []string{"manifests/" + PackageName + ".clusterserviceversion.yaml", "metadata/annotations.yaml"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in %v", want, names)
		}
	}
}
