package olm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Package, channel and the overlay the bundle is made from.
const (
	PackageName = "lvms-operator"
	Channel     = "alpha"
	// Overlay is the kustomize overlay whose Deployment, RBAC and extra objects the bundle carries: OLM
	// installs LVMS on OpenShift first, into openshift-storage.
	Overlay = "deploy/overlays/openshift"
	// SuggestedNamespace is where the console suggests installing (the ConsolePlugin names it).
	SuggestedNamespace = "openshift-storage"
)

// SCC substitution: OLM cannot ship SecurityContextConstraints, so in an OLM install the node agent uses
// OpenShift's own privileged SCC (it needs privileged, hostPID and host paths anyway) instead of the
// lvms-node-agent SCC the overlay creates. This is the only difference between the CSV's RBAC and deploy/'s.
const (
	OverlaySCC = "lvms-node-agent"
	BundleSCC  = "privileged"
)

// internalKinds are created by the operator or the node agents, not by users: the console hides them from
// "Create" (operators.operatorframework.io/internal-objects) and alm-examples leaves them out.
var internalKinds = []string{"LVMVolumeGroup", "LVMVolumeGroupNodeStatus", "LVMNode", "LogicalVolume", "LogicalVolumeGroupSnapshot"}

// displayNames name the kinds in the console.
var displayNames = map[string]string{
	"LVMCluster": "LVM Cluster", "LVMNodeSet": "LVM Node Set", "LVMNode": "LVM Node", "LVMVolumeGroup": "LVM Volume Group",
	"LVMVolumeGroupNodeStatus": "LVM Volume Group Node Status", "LogicalVolume": "Logical Volume",
	"LogicalVolumeGroupSnapshot": "Logical Volume Group Snapshot",
}

// bundleKinds are the kinds OLM accepts in a bundle's manifests besides the CSV and CRDs (the operator
// registry's supported resources) that the overlay renders and the CSV does not express itself.
var bundleKinds = []string{"Service", "ClusterRole", "ClusterRoleBinding", "ServiceMonitor", "PrometheusRule", "ConsolePlugin"}

// Options are the bundle's inputs besides deploy/.
type Options struct {
	// Root is the repository's top directory.
	Root string
	// Version is the operator's semantic version (the CSV's spec.version).
	Version string
	// Image is the operator (and node agent) image; default the overlay's.
	Image string
}

// Generate returns the bundle's files by path under bundle/.
func Generate(o Options) (map[string][]byte, error) {
	objs, err := Render(filepath.Join(o.Root, Overlay))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	crds, crdFiles, err := readCRDs(o.Root)
	if err != nil {
		return nil, err
	}
	for name, b := range crdFiles {
		files["manifests/"+name] = b
	}
	samples, err := readSamples(filepath.Join(o.Root, "deploy", "samples"))
	if err != nil {
		return nil, err
	}
	csv, err := buildCSV(o, objs, crds, samples)
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(csv)
	if err != nil {
		return nil, err
	}
	files["manifests/"+PackageName+".clusterserviceversion.yaml"] = b
	for _, u := range objs {
		if !slices.Contains(bundleKinds, u.GetKind()) || boundToComponent(u) {
			continue
		}
		if u.GetKind() == "ClusterRole" && isComponentRole(objs, u.GetName()) {
			continue // its rules are in the CSV's clusterPermissions
		}
		u = u.DeepCopy()
		u.SetNamespace("") // OLM creates namespaced objects in the install namespace
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		files["manifests/"+strings.ToLower(u.GetName()+"_"+u.GetKind())+".yaml"] = b
	}
	ann, err := yaml.Marshal(map[string]any{"annotations": Annotations()})
	if err != nil {
		return nil, err
	}
	files["metadata/annotations.yaml"] = ann
	return files, nil
}

// Annotations are the bundle's metadata/annotations.yaml, also the bundle image's labels.
func Annotations() map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         PackageName,
		"operators.operatorframework.io.bundle.channels.v1":        Channel,
		"operators.operatorframework.io.bundle.channel.default.v1": Channel,
	}
}

// Render runs kustomize on dir.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	return decodeAll(out)
}

func decodeAll(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// components are the ServiceAccounts whose rights the CSV grants.
var components = []string{"lvms-operator", "lvms-node-agent", "lvms-bundle"}

// boundToComponent reports whether u is a binding for an LVMS ServiceAccount: the CSV's permissions replace it.
func boundToComponent(u *unstructured.Unstructured) bool {
	if u.GetKind() != "ClusterRoleBinding" && u.GetKind() != "RoleBinding" {
		return false
	}
	subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
	for _, s := range subjects {
		if m, _ := s.(map[string]any); m["kind"] == "ServiceAccount" && slices.Contains(components, fmt.Sprint(m["name"])) {
			return true
		}
	}
	return false
}

// isComponentRole reports whether a binding grants the ClusterRole name to an LVMS ServiceAccount.
func isComponentRole(objs []*unstructured.Unstructured, name string) bool {
	for _, u := range objs {
		ref, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
		if boundToComponent(u) && ref == name {
			return true
		}
	}
	return false
}

// Permissions are the rules of every (Cluster)RoleBinding to an LVMS ServiceAccount, per account: bindings
// of ClusterRoleBindings in clusterPermissions, RoleBindings in permissions. The node agent's SCC becomes
// BundleSCC.
func Permissions(objs []*unstructured.Unstructured) (cluster, namespaced []Permission, err error) {
	roles := map[string][]rbacv1.PolicyRule{}
	for _, u := range objs {
		if u.GetKind() == "ClusterRole" || u.GetKind() == "Role" {
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				return nil, nil, err
			}
			roles[u.GetKind()+"/"+u.GetName()] = r.Rules
		}
	}
	byAccount := map[bool]map[string][]rbacv1.PolicyRule{true: {}, false: {}}
	for _, u := range objs {
		if !boundToComponent(u) {
			continue
		}
		var b rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
			return nil, nil, err
		}
		rules, ok := roles[b.RoleRef.Kind+"/"+b.RoleRef.Name]
		if !ok {
			return nil, nil, fmt.Errorf("%s %s binds %s %s, which the overlay lacks", u.GetKind(), u.GetName(), b.RoleRef.Kind, b.RoleRef.Name)
		}
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && slices.Contains(components, s.Name) {
				isCluster := u.GetKind() == "ClusterRoleBinding"
				byAccount[isCluster][s.Name] = append(byAccount[isCluster][s.Name], substituteSCC(rules)...)
			}
		}
	}
	list := func(m map[string][]rbacv1.PolicyRule) []Permission {
		var out []Permission
		for _, sa := range components {
			if rules, ok := m[sa]; ok {
				out = append(out, Permission{ServiceAccountName: sa, Rules: rules})
			}
		}
		return out
	}
	return list(byAccount[true]), list(byAccount[false]), nil
}

func substituteSCC(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		r = *r.DeepCopy()
		if slices.Contains(r.Resources, "securitycontextconstraints") {
			for j, n := range r.ResourceNames {
				if n == OverlaySCC {
					r.ResourceNames[j] = BundleSCC
				}
			}
		}
		out[i] = r
	}
	return out
}

func buildCSV(o Options, objs []*unstructured.Unstructured, crds []apiextensionsv1.CustomResourceDefinition, samples []map[string]any) (*CSV, error) {
	var dep *appsv1.Deployment
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			dep = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, dep); err != nil {
				return nil, err
			}
		}
	}
	if dep == nil {
		return nil, fmt.Errorf("%s renders no Deployment", Overlay)
	}
	image := dep.Spec.Template.Spec.Containers[0].Image
	if o.Image != "" {
		image = o.Image
		for i := range dep.Spec.Template.Spec.Containers {
			c := &dep.Spec.Template.Spec.Containers[i]
			c.Image = image
		}
	}
	cluster, namespaced, err := Permissions(objs)
	if err != nil {
		return nil, err
	}
	var owned []OwnedCRD
	var internal []string
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if !v.Served {
				continue
			}
			desc := ""
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				desc = strings.Join(strings.Fields(v.Schema.OpenAPIV3Schema.Description), " ")
			}
			owned = append(owned, OwnedCRD{Name: c.Name, Version: v.Name, Kind: c.Spec.Names.Kind,
				DisplayName: displayNames[c.Spec.Names.Kind], Description: desc})
		}
		if slices.Contains(internalKinds, c.Spec.Names.Kind) {
			internal = append(internal, c.Name)
		}
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].Name+owned[i].Version < owned[j].Name+owned[j].Version })
	slices.Sort(internal)
	var examples []map[string]any
	for _, s := range samples {
		if kind, _ := s["kind"].(string); !slices.Contains(internalKinds, kind) {
			examples = append(examples, s)
		}
	}
	almExamples, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return nil, err
	}
	internalJSON, _ := json.Marshal(internal)
	return &CSV{
		TypeMeta: metav1.TypeMeta{APIVersion: "operators.coreos.com/v1alpha1", Kind: "ClusterServiceVersion"},
		Metadata: CSVMeta{
			Name: PackageName + ".v" + o.Version,
			Annotations: map[string]string{
				"alm-examples":                 string(almExamples),
				"capabilities":                 "Basic Install",
				"categories":                   "Storage",
				"console.openshift.io/plugins": `["lvms-console"]`,
				"containerImage":               image,
				"description":                  "Local storage on LVM for Kubernetes, OpenShift and MicroShift: volume groups per node or on a shared SAN LUN, TopoLVM-compatible CSI volumes, snapshots and an admin console.",
				"operatorframework.io/suggested-namespace":        SuggestedNamespace,
				"operators.operatorframework.io/internal-objects": string(internalJSON),
				"repository": "https://github.com/lvms-dev/lvms",
			},
			Labels: map[string]string{"operatorframework.io/arch.amd64": "supported", "operatorframework.io/os.linux": "supported"},
		},
		Spec: CSVSpec{
			DisplayName: "LVM Storage",
			Description: csvDescription,
			Version:     o.Version,
			// The node binding admission policy needs admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy.
			MinKubeVersion: "1.30.0",
			Maturity:       "alpha",
			Provider:       Provider{Name: "LVMS", URL: "https://github.com/lvms-dev/lvms"},
			Maintainers:    []Maintainer{{Name: "LVMS maintainers", Email: "lvms-dev@googlegroups.com"}},
			Links:          []Link{{Name: "Documentation", URL: "https://github.com/lvms-dev/lvms/blob/main/README.md"}},
			Keywords:       []string{"storage", "lvm", "local storage", "topolvm", "csi"},
			// The operator manages the namespace it runs in (POD_NAMESPACE).
			InstallModes:              []InstallMode{{"OwnNamespace", true}, {"SingleNamespace", false}, {"MultiNamespace", false}, {"AllNamespaces", false}},
			CustomResourceDefinitions: CustomResourceDefinitions{Owned: owned},
			Install: Install{Strategy: "deployment", Spec: StrategySpec{
				Deployments:        []StrategyDeployment{{Name: dep.Name, Label: dep.Labels, Spec: dep.Spec}},
				ClusterPermissions: cluster,
				Permissions:        namespaced,
			}},
			RelatedImages: []RelatedImage{{Name: "lvms", Image: image}},
		},
	}, nil
}

const csvDescription = `LVM Storage (LVMS) provisions local persistent volumes from LVM volume groups on each node, or from a
volume group on a SAN LUN that every node shares (RWX block volumes for VM live migration).

Create an LVMNodeSet (v2alpha1) or an LVMCluster (v1alpha1): it names the nodes and the devices that form each
volume group, thin or thick; the operator generates StorageClasses and VolumeSnapshotClasses, and every node's
LVMNode shows desired against actual state, with the reason for every device it did not use.

The CSI driver is TopoLVM-compatible (topolvm.io), so volumes created by TopoLVM or an earlier LVMS keep working.
The admin console is in the OpenShift console under Storage; support bundles are must-gather compatible.

The admission policies LVMS relies on (node agents confined to their own node; moves asked for only by those who
may delete the claim) are not a kind a bundle can carry: the operator creates them itself, and while it cannot,
refuses volume moves and new shared volumes, says so in the LVMNodeSet's ProviderReady condition and raises the
LVMSAdmissionPolicyMissing alert.`

// readCRDs reads deploy/crds and deploy/crds/legacy: the parsed CRDs, and their files for the bundle.
func readCRDs(root string) ([]apiextensionsv1.CustomResourceDefinition, map[string][]byte, error) {
	var crds []apiextensionsv1.CustomResourceDefinition
	files := map[string][]byte{}
	for _, dir := range []string{"deploy/crds", "deploy/crds/legacy"} {
		paths, _ := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, err
			}
			var c apiextensionsv1.CustomResourceDefinition
			if err := yaml.UnmarshalStrict(b, &c); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", p, err)
			}
			crds = append(crds, c)
			files[filepath.Base(p)] = b
		}
	}
	if len(crds) == 0 {
		return nil, nil, fmt.Errorf("no CRDs under %s/deploy/crds", root)
	}
	return crds, files, nil
}

// readSamples reads every sample, without a namespace (the console fills in the install namespace).
func readSamples(dir string) ([]map[string]any, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	slices.Sort(paths)
	var out []map[string]any
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		objs, err := decodeAll(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, u := range objs {
			unstructured.RemoveNestedField(u.Object, "metadata", "namespace")
			out = append(out, u.Object)
		}
	}
	return out, nil
}
