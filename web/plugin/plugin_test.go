package plugin_test

import (
	"encoding/json"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/testtier"
	"github.com/lvms-dev/lvms/web"
	"github.com/lvms-dev/lvms/web/plugin"
)

type manifest struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	BaseURL     string `json:"baseURL"`
	LoadScripts []string
	Method      string `json:"registrationMethod"`
	Extensions  []struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
	} `json:"extensions"`
}

func TestManifestMatchesConsolePluginAndEntry(t *testing.T) {
	b, err := fs.ReadFile(plugin.Dist(), "plugin-manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("plugin-manifest.json: %v", err)
	}
	var cp struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct{ Name string }
		Spec       struct {
			Backend struct {
				Type    string
				Service struct{ BasePath string }
			}
			Proxy []struct {
				Alias         string
				Authorization string
			}
		}
	}
	if err := yaml.Unmarshal(plugin.ConsolePluginYAML(), &cp); err != nil {
		t.Fatalf("consoleplugin.yaml: %v", err)
	}
	entry, err := fs.ReadFile(plugin.Dist(), "plugin-entry.js")
	if err != nil {
		t.Fatal(err)
	}
	js := string(entry)
	checks := []struct {
		what string
		ok   bool
	}{
		{"manifest name is the plugin name", m.Name == plugin.Name},
		{"ConsolePlugin is console.openshift.io/v1 with the plugin name", cp.APIVersion == "console.openshift.io/v1" && cp.Metadata.Name == plugin.Name},
		{"the backend serves the manifest at /plugin/", cp.Spec.Backend.Type == "Service" && cp.Spec.Backend.Service.BasePath == "/plugin/"},
		{"the API proxy forwards the user's token", len(cp.Spec.Proxy) == 1 && cp.Spec.Proxy[0].Alias == "api" && cp.Spec.Proxy[0].Authorization == "UserToken"},
		{"the entry calls the API through that proxy", strings.Contains(js, `"/api/proxy/plugin/" + PLUGIN + "/api/api/v1"`) && strings.Contains(js, `var PLUGIN = "`+plugin.Name+`"`)},
		{"the entry has the manifest's version", strings.Contains(js, `var VERSION = "`+m.Version+`"`)},
		{"baseURL is the console's plugin path", m.BaseURL == "/api/plugins/"+plugin.Name+"/"},
		{"registration by callback", m.Method == "callback"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: no", c.what)
		}
	}
	for _, s := range m.LoadScripts {
		if _, err := fs.Stat(plugin.Dist(), s); err != nil {
			t.Errorf("loadScripts names %s, which is not served: %v", s, err)
		}
	}
	refs := regexp.MustCompile(`"\$codeRef":\s*"([^".]+)`).FindAllStringSubmatch(string(b), -1)
	if len(refs) == 0 {
		t.Fatal("no $codeRef in the manifest")
	}
	for _, r := range refs {
		if !strings.Contains(js, `name !== "`+r[1]+`"`) {
			t.Errorf("$codeRef %s is not a module plugin-entry.js exposes", r[1])
		}
	}
}

// TestEntryInNode loads plugin-entry.js in node the way the console does, for both entry callbacks, and
// renders its views from a real JSON API serving the prepared state.
func TestEntryInNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testtier.Unavailable(t, "node is not installed: cannot run the plugin's JavaScript (install Debian's nodejs)")
	}
	snap := console.FromObjects(consoletest.Prepared("lvms"), consoletest.At)
	srv := httptest.NewServer(web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap})}))
	defer srv.Close()
	dir := t.TempDir()
	entry := filepath.Join(dir, "plugin-entry.js")
	b, _ := fs.ReadFile(plugin.Dist(), "plugin-entry.js")
	if err := os.WriteFile(entry, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ callback, wantID string }{
		{"__load_plugin_entry__", plugin.Name},
		{"loadPluginEntry", plugin.Name + "@0.1.0"},
	} {
		t.Run(tc.callback, func(t *testing.T) {
			out, err := exec.Command(node, "testdata/run-entry.js", entry, srv.URL+"/api/v1", tc.callback).CombinedOutput()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, out)
			}
			var got struct {
				ID, Component, Overview, Node, Device, BadModule string
				NotFound                                         struct {
					Status int
					Code   string
				}
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("output %q: %v", out, err)
			}
			want := []struct{ what, in, text string }{
				{"overview lists the degraded node", got.Overview, "worker-b"},
				{"overview marks differences", got.Overview, "≠ differs"},
				{"overview explains the missing path", got.Overview, "Path not found on the node"},
				{"node shows the missing device", got.Node, "/dev/nvme1n1"},
				{"device quotes the agent", got.Device, "/dev/sdb has an invalid filesystem signature (xfs)"},
				{"device explains", got.Device, "LVMS only uses empty devices"},
				{"device warns before wiping", got.Device, "Warning: Wiping destroys every byte of data on /dev/sdb"},
			}
			for _, w := range want {
				if !strings.Contains(w.in, w.text) {
					t.Errorf("%s: %q not in %q", w.what, w.text, w.in)
				}
			}
			if got.ID != tc.wantID || got.Component != "function" {
				t.Errorf("registered as %q with a %s, want %q with a component function", got.ID, got.Component, tc.wantID)
			}
			if got.NotFound.Status != 404 || got.NotFound.Code != "NotFound" {
				t.Errorf("unknown node: %+v, want the API's 404 NotFound", got.NotFound)
			}
			if !strings.Contains(got.BadModule, "no exposed module Nope") {
				t.Errorf("unknown module: %q", got.BadModule)
			}
		})
	}
}
