package deploy

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lvms-dev/lvms/console/live"
)

// components name the ServiceAccounts the manifests bind roles to.
var components = map[string]string{"lvms-operator": "operator", "lvms-node-agent": "node-agent", "lvms-bundle": "bundle",
	"prometheus-k8s": scraper}

// scraper is Prometheus (OpenShift's cluster monitoring, kube-prometheus): only the overlays with monitoring
// bind it.
const scraper = "metrics-scraper"

// TestRBAC_MatchesGolden lists every permission each component gets, one line per API group, resource and
// rule, and compares them with testdata/rbac.golden, where each line says why it is needed. Granting
// anything new means adding a line there, with its reason. Every overlay grants the same.
func TestRBAC_MatchesGolden(t *testing.T) {
	want, whys := readGolden(t, filepath.Join("testdata", "rbac.golden"))
	for _, dir := range []string{"overlays/kubernetes", "overlays/openshift", "overlays/microshift", "overlays/prometheus-operator"} {
		got := permissionLines(t, render(t, dir))
		wantHere := want
		if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, scraper+" ") }) {
			wantHere = slices.DeleteFunc(slices.Clone(want), func(l string) bool { return strings.HasPrefix(l, scraper+" ") })
		}
		for _, r := range live.ViewerRules() {
			got = append(got, ruleLines("console-viewer", "cluster", r)...)
		}
		slices.Sort(got)
		got = slices.Compact(got)
		for _, l := range got {
			if reason := forbidden(l); reason != "" {
				t.Errorf("deploy/%s: %s: %s", dir, l, reason)
			}
		}
		if missing, extra := diff(wantHere, got); len(missing)+len(extra) > 0 {
			t.Errorf("deploy/%s grants other permissions than testdata/rbac.golden:\n granted but not in the golden file (add them with a reason):\n  %s\n in the golden file but not granted:\n  %s",
				dir, strings.Join(extra, "\n  "), strings.Join(missing, "\n  "))
		}
	}
	for _, l := range want {
		if whys[l] == "" {
			t.Errorf("testdata/rbac.golden: %q has no reason (# why)", l)
		}
	}
}

// permissionLines are the rules every Role and ClusterRole grants through its bindings.
func permissionLines(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{}
	var bindings []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
			rules[o.GetKind()+"/"+o.GetName()] = r.Rules
		case "ClusterRoleBinding", "RoleBinding":
			bindings = append(bindings, o)
		}
	}
	var out []string
	for _, b := range bindings {
		var rb rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &rb); err != nil {
			t.Fatalf("%s %s: %v", b.GetKind(), b.GetName(), err)
		}
		scope := "namespace"
		if b.GetKind() == "ClusterRoleBinding" {
			scope = "cluster"
		}
		role, ok := rules[rb.RoleRef.Kind+"/"+rb.RoleRef.Name]
		if !ok {
			t.Errorf("%s %s binds %s %s, which the manifests do not have", b.GetKind(), b.GetName(), rb.RoleRef.Kind, rb.RoleRef.Name)
		}
		for _, s := range rb.Subjects {
			c, ok := components[s.Name]
			if s.Kind != "ServiceAccount" || !ok {
				t.Errorf("%s %s binds %s %s: not a component of LVMS", b.GetKind(), b.GetName(), s.Kind, s.Name)
				continue
			}
			for _, r := range role {
				out = append(out, ruleLines(c, scope, r)...)
			}
		}
	}
	return out
}

// ruleLines is one line per API group and resource of r: "component scope group/resource verbs [names]".
func ruleLines(component, scope string, r rbacv1.PolicyRule) []string {
	verbs := slices.Clone(r.Verbs)
	slices.Sort(verbs)
	names := ""
	if len(r.ResourceNames) > 0 {
		n := slices.Clone(r.ResourceNames)
		slices.Sort(n)
		names = " names=" + strings.Join(n, ",")
	}
	var out []string
	for _, u := range r.NonResourceURLs {
		out = append(out, fmt.Sprintf("%s %s url:%s %s", component, scope, u, strings.Join(verbs, ",")))
	}
	for _, g := range r.APIGroups {
		if g == "" {
			g = "core"
		}
		for _, res := range r.Resources {
			out = append(out, fmt.Sprintf("%s %s %s/%s %s%s", component, scope, g, res, strings.Join(verbs, ","), names))
		}
	}
	return out
}

// readGolden returns the sorted permission lines of the golden file and each line's reason.
func readGolden(t *testing.T, path string) ([]string, map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	whys := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		line, why, _ := strings.Cut(text, "#")
		line = strings.Join(strings.Fields(line), " ")
		lines = append(lines, line)
		whys[line] = strings.TrimSpace(why)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines, whys
}

func diff(want, got []string) (missing, extra []string) {
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	return missing, extra
}

// forbidden says why a permission line must never be granted, whatever the golden file says.
func forbidden(line string) string {
	f := strings.Fields(line)
	resource, verbs := f[2], strings.Split(f[3], ",")
	named := len(f) > 4
	switch {
	case slices.Contains(verbs, "*") || strings.HasSuffix(resource, "/*"):
		return "wildcards grant whatever comes next"
	case slices.Contains(verbs, "escalate") || slices.Contains(verbs, "impersonate"):
		return "escalate and impersonate hand out more than the component has"
	case slices.Contains(verbs, "bind") && !named:
		return "bind only with the resourceNames of the roles granted"
	case strings.HasPrefix(resource, "security.openshift.io/") && !named:
		return "SecurityContextConstraints only by resourceNames"
	case resource == "core/pods" && f[1] == "cluster" && !slices.Equal(verbs, []string{"get", "list", "watch"}):
		return "no cluster-wide writes on pods"
	}
	return ""
}
