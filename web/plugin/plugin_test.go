package plugin_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/web/plugin"
)

type manifest struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	BaseURL     string   `json:"baseURL"`
	LoadScripts []string `json:"loadScripts"`
	Method      string   `json:"registrationMethod"`
	Extensions  []struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
	} `json:"extensions"`
}

func readManifest(t *testing.T) (manifest, string) {
	t.Helper()
	b, err := fs.ReadFile(plugin.Dist(), "plugin-manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("plugin-manifest.json: %v", err)
	}
	return m, string(b)
}

// The built manifest is what the console expects of this plugin: its name, the console's asset path, the
// callback registration, the entry script present, every code reference exposed by the entry, and the
// routes and tabs the console shows.
func TestManifest_IsTheConsolesView(t *testing.T) {
	m, raw := readManifest(t)
	if m.Name != plugin.Name || m.BaseURL != "/api/plugins/"+plugin.Name+"/" || m.Method != "callback" {
		t.Errorf("manifest %s at %s registered by %s, want %s at /api/plugins/%s/ by callback", m.Name, m.BaseURL, m.Method, plugin.Name, plugin.Name)
	}
	entry, err := fs.ReadFile(plugin.Dist(), "plugin-entry.js")
	if err != nil || !slicesContains(m.LoadScripts, "plugin-entry.js") {
		t.Fatalf("loadScripts %v, entry: %v", m.LoadScripts, err)
	}
	for _, r := range regexp.MustCompile(`"\$codeRef":"([^".]+)`).FindAllStringSubmatch(raw, -1) {
		if !strings.Contains(string(entry), r[1]+`:()=>`) {
			t.Errorf("$codeRef %s is not a module plugin-entry.js exposes", r[1])
		}
	}
	var paths []string
	tabs := 0
	for _, e := range m.Extensions {
		switch e.Type {
		case "console.page/route":
			paths = append(paths, e.Properties["path"].(string))
		case "console.tab/horizontalNav":
			tabs++
		}
	}
	for _, want := range []string{"/lvms", "/lvms/nodes/:node", "/lvms/nodes/:node/devices/:device"} {
		if !slicesContains(paths, want) {
			t.Errorf("no route %s in %v", want, paths)
		}
	}
	if tabs != 2 {
		t.Errorf("%d details tabs, want one on LVMCluster and one on LVMNodeSet", tabs)
	}
	// Every chunk the entry can load is served: webpack names a chunk ({id: name}[id] || id) + "-chunk-" + hash.
	named := map[string]string{}
	for _, kv := range regexp.MustCompile(`(\d+):"(exposed-\w+)"`).FindAllStringSubmatch(string(entry), -1) {
		named[kv[1]] = kv[2]
	}
	for _, c := range regexp.MustCompile(`"-chunk-"\+\{([^}]*)\}`).FindAllStringSubmatch(string(entry), -1) {
		for _, kv := range regexp.MustCompile(`(\w+):"([0-9a-f]+)"`).FindAllStringSubmatch(c[1], -1) {
			id := kv[1]
			if n, ok := named[id]; ok {
				id = n
			}
			name := id + "-chunk-" + kv[2] + ".min.js"
			if _, err := fs.Stat(plugin.Dist(), name); err != nil {
				t.Errorf("the entry loads %s, which is not in dist/", name)
			}
		}
	}
}

// Every string the plugin translates, and every %plugin__lvms-console~...% of its extensions, is in the
// English catalogue the console loads.
func TestLocales_CoverEveryString(t *testing.T) {
	b, err := fs.ReadFile(plugin.Dist(), "locales/en/plugin__lvms-console.json")
	if err != nil {
		t.Fatal(err)
	}
	var catalogue map[string]string
	if err := json.Unmarshal(b, &catalogue); err != nil {
		t.Fatal(err)
	}
	_, raw := readManifest(t)
	var keys []string
	for _, m := range regexp.MustCompile(`%plugin__lvms-console~([^%]+)%`).FindAllStringSubmatch(raw, -1) {
		keys = append(keys, m[1])
	}
	srcs, _ := fs.Glob(os.DirFS("src/src"), "*.tsx")
	for _, name := range srcs {
		src, _ := os.ReadFile("src/src/" + name)
		for _, m := range regexp.MustCompile(`\bt\('((?:[^'\\]|\\.)*)'`).FindAllStringSubmatch(string(src), -1) {
			keys = append(keys, m[1])
		}
	}
	if len(srcs) == 0 || len(keys) < 10 {
		t.Fatalf("found %d sources and %d strings", len(srcs), len(keys))
	}
	for _, k := range keys {
		if _, ok := catalogue[k]; !ok {
			t.Errorf("%q is not in locales/en/plugin__lvms-console.json", k)
		}
	}
}

func TestHandler_ServesDistWithTypesAndCaching(t *testing.T) {
	srv := httptest.NewServer(plugin.Handler())
	defer srv.Close()
	chunks, _ := fs.Glob(plugin.Dist(), "*-chunk-*.min.js")
	if len(chunks) == 0 {
		t.Fatal("no chunks in dist/")
	}
	for _, tc := range []struct {
		path, contentType, cache string
		status                   int
	}{
		{"/plugin/plugin-manifest.json", "application/json", "no-cache", 200},
		{"/plugin/plugin-entry.js", "application/javascript; charset=utf-8", "no-cache", 200},
		{"/plugin/" + chunks[0], "application/javascript; charset=utf-8", "public, max-age=31536000, immutable", 200},
		{"/plugin/locales/en/plugin__lvms-console.json", "application/json", "no-cache", 200},
		{"/plugin/../plugin.go", "", "", 404},
		{"/plugin/", "", "", 404},
		{"/plugin/nope.js", "", "", 404},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s = %d, want %d", tc.path, resp.StatusCode, tc.status)
			continue
		}
		if tc.status == 200 && (resp.Header.Get("Content-Type") != tc.contentType || resp.Header.Get("Cache-Control") != tc.cache) {
			t.Errorf("GET %s: Content-Type %q Cache-Control %q, want %q and %q", tc.path,
				resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), tc.contentType, tc.cache)
		}
	}
}

// The plugin metadata webpack reads names the plugin as the ConsolePlugin does.
func TestPackageJSON_NamesThePlugin(t *testing.T) {
	b, err := os.ReadFile("src/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		ConsolePlugin struct{ Name string } `json:"consolePlugin"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.ConsolePlugin.Name != plugin.Name {
		t.Errorf("package.json consolePlugin.name = %q (%v), want %s", pkg.ConsolePlugin.Name, err, plugin.Name)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
