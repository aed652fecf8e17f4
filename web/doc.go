// Package web serves the LVMS console over HTTP: server-rendered pages (chi, templ components, htmx
// polling for live refresh, CSS for light and dark), and a JSON API under /api/v1 with the same data for the
// OpenShift console plugin page. Every request reads the cluster as its caller (the bearer token of the
// request when present, else the server's credentials) and nothing is ever written: the console is
// read-only. NewServer returns an http.Handler the operator mounts on its own port; `lvms console` serves it
// on 127.0.0.1.
package web
