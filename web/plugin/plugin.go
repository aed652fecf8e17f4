package plugin

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed dist consoleplugin.yaml
var files embed.FS

// Name is the plugin's name: the ConsolePlugin's metadata.name and the manifest's name.
const Name = "lvms-console"

// Dist holds the files the console loads (plugin-manifest.json, plugin-entry.js).
func Dist() fs.FS {
	d, _ := fs.Sub(files, "dist") // "dist" is embedded: Sub cannot fail
	return d
}

// ConsolePluginYAML is the ConsolePlugin object for the OpenShift console.
func ConsolePluginYAML() []byte {
	b, _ := files.ReadFile("consoleplugin.yaml") // embedded
	return b
}

// Handler serves the plugin's files with the content types the console requires (it sends nosniff) and
// without caching for the manifest and the entry script, which change with every release.
func Handler() http.Handler {
	dist := Dist()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, "/plugin")), "/")
		b, err := fs.ReadFile(dist, name)
		if err != nil || name == "" {
			http.NotFound(w, r)
			return
		}
		switch path.Ext(name) {
		case ".js":
			w.Header().Set("Content-Type", "application/javascript; charset=utf-8")
		case ".json":
			w.Header().Set("Content-Type", "application/json")
		}
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	})
}
