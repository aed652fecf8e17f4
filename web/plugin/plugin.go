package plugin

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed dist
var files embed.FS

// Name is the plugin's name: the ConsolePlugin's metadata.name (deploy/overlays/openshift) and the manifest's.
const Name = "lvms-console"

// Dist holds the files the console loads: plugin-manifest.json, plugin-entry.js, the chunks it loads, and
// locales/en/plugin__lvms-console.json.
func Dist() fs.FS {
	d, _ := fs.Sub(files, "dist") // "dist" is embedded: Sub cannot fail
	return d
}

// Handler serves the plugin's files with the content types the console requires (it sends nosniff). The
// manifest, the entry script and the translations keep their names from release to release, so they are
// not cached; chunks carry their content hash in their name and are cached for a year.
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
		default:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
		if strings.Contains(name, "-chunk-") {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		_, _ = w.Write(b)
	})
}
