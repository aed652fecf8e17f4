package deploy

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lvms-dev/lvms/web/plugin"
)

// The OpenShift console finds the plugin through the ConsolePlugin: its backend and its API proxy must name
// the console Service the overlay creates, in the overlay's namespace, on a port that Service has, with the
// user's token on proxied API calls; its name is the plugin's.
func TestConsolePlugin_PointsAtTheOverlaysConsoleService(t *testing.T) {
	objs := render(t, "overlays/openshift")
	plugins := byKind(objs, "ConsolePlugin")
	if len(plugins) != 1 {
		t.Fatalf("%d ConsolePlugins, want 1", len(plugins))
	}
	cp := plugins[0]
	if cp.GetName() != plugin.Name {
		t.Errorf("ConsolePlugin %s, want %s (the plugin manifest's name)", cp.GetName(), plugin.Name)
	}
	var ns string
	for _, o := range byKind(objs, "Namespace") {
		ns = o.GetName()
	}
	check := func(what string, svc map[string]any) {
		name, _, _ := unstructured.NestedString(svc, "name")
		namespace, _, _ := unstructured.NestedString(svc, "namespace")
		port := fmt.Sprint(svc["port"])
		for _, s := range byKind(objs, "Service") {
			if s.GetName() != name || s.GetNamespace() != namespace {
				continue
			}
			ports, _, _ := unstructured.NestedSlice(s.Object, "spec", "ports")
			if !slices.ContainsFunc(ports, func(p any) bool { return fmt.Sprint(p.(map[string]any)["port"]) == port }) {
				t.Errorf("%s: port %s, Service %s/%s has %v", what, port, namespace, name, ports)
			}
			return
		}
		t.Errorf("%s names Service %s/%s, which the overlay (namespace %s) does not create", what, namespace, name, ns)
	}
	backend, _, _ := unstructured.NestedMap(cp.Object, "spec", "backend", "service")
	check("backend", backend)
	if base, _ := backend["basePath"].(string); base != "/plugin/" {
		t.Errorf("backend basePath %q, want /plugin/ (where the operator serves the plugin)", base)
	}
	proxies, _, _ := unstructured.NestedSlice(cp.Object, "spec", "proxy")
	if len(proxies) != 1 {
		t.Fatalf("proxy = %v, want the API alias", proxies)
	}
	p := proxies[0].(map[string]any)
	if p["alias"] != "api" || p["authorization"] != "UserToken" {
		t.Errorf("proxy %v: want alias api with the user's token", p)
	}
	svc, _, _ := unstructured.NestedMap(p, "endpoint", "service")
	check("API proxy", svc)
}
