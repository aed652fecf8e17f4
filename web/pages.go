package web

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/web/components"
)

// page returns the layout model for a request and its snapshot.
func (s *server) page(r *http.Request, title, nav string, snap *console.Snapshot) components.Page {
	p := components.Page{Title: title, Nav: nav, HTMX: HTMXFile, LiveURL: r.URL.RequestURI(), Migration: s.opts.Migration != nil, Cluster: s.opts.Cluster}
	if snap != nil {
		p.Cluster, p.User, p.At = snap.Cluster, snap.User, snap.At
	}
	if b := s.opts.Bundle; b != nil {
		p.LiveURL = "" // a bundle does not change
		p.Bundle = &components.BundleBanner{Name: b.Name, At: b.At}
	}
	return p
}

// isFragment reports whether htmx asked for the live part of a page only.
func isFragment(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

// render writes a component with a status, rendering into memory first so a failed render never leaves a
// half-written page.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		s.log.ErrorContext(r.Context(), "Rendering failed", "path", r.URL.Path, "error", err)
		http.Error(w, "internal error: the page could not be rendered; the server log has the details", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "HX-Request, Authorization")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage renders an error page with a way back.
func (s *server) errorPage(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
	s.errorPageOf(w, r, nil, status, heading, message)
}

// errorPageOf is errorPage for a request whose snapshot was read: its header names the cluster and user
// as every other page does.
func (s *server) errorPageOf(w http.ResponseWriter, r *http.Request, snap *console.Snapshot, status int, heading, message string) {
	s.render(w, r, status, components.ErrorPage(s.page(r, heading, "", snap), status, heading, message))
}

// pageSnapshot reads the snapshot for a page; on failure it writes the error page and returns nil. A cluster
// without the LVMS CRDs gets the "not installed" page.
func (s *server) pageSnapshot(w http.ResponseWriter, r *http.Request) *console.Snapshot {
	snap, err := s.snapshot(r)
	if err != nil {
		status, code, msg := s.classify(r, err)
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="lvms-console"`)
		}
		s.errorPage(w, r, status, headingFor(code), msg)
		return nil
	}
	if !snap.Installed {
		s.render(w, r, http.StatusOK, components.NotInstalledPage(s.page(r, "LVMS is not installed", "overview", snap)))
		return nil
	}
	return snap
}

func headingFor(code string) string {
	switch code {
	case "Forbidden":
		return "Forbidden"
	case "Unauthorized":
		return "Not logged in"
	case "NotFound":
		return "Not found"
	}
	return "The cluster could not be read"
}

func (s *server) overviewPage(w http.ResponseWriter, r *http.Request) {
	snap := s.pageSnapshot(w, r)
	if snap == nil {
		return
	}
	v := overviewView(console.BuildOverview(snap), r.URL.Query())
	p := s.page(r, "Overview", "overview", snap)
	if isFragment(r) {
		s.render(w, r, http.StatusOK, components.OverviewContent(p, v))
		return
	}
	s.render(w, r, http.StatusOK, components.OverviewPage(p, v))
}

// nodesPerPage is how many nodes the overview lists at once. Thousands of rows are megabytes of HTML no
// one reads: the nodes that need attention come first, the others are a page link or a filter away.
const nodesPerPage = 100

// overviewView caps the differences, filters the nodes by name or state (query q) and shows one page of
// them (query page, from 1).
func overviewView(o *console.Overview, query url.Values) components.OverviewView {
	filter := query.Get("q")
	v := components.OverviewView{O: o, Differences: o.Differences, Filter: filter, PageSize: nodesPerPage}
	if len(v.Differences) > console.MaxOverviewDifferences {
		v.More = len(v.Differences) - console.MaxOverviewDifferences
		v.Differences = v.Differences[:console.MaxOverviewDifferences]
	}
	nodes := filterNodes(o.Nodes, filter)
	pages := max((len(nodes)+nodesPerPage-1)/nodesPerPage, 1)
	page, err := strconv.Atoi(query.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	page = min(page, pages)
	from := (page - 1) * nodesPerPage
	v.Nodes, v.NodesFrom, v.NodesTotal = nodes[from:min(from+nodesPerPage, len(nodes))], from, len(nodes)
	if page > 1 {
		v.PrevURL = overviewURL(filter, page-1)
	}
	if page < pages {
		v.NextURL = overviewURL(filter, page+1)
	}
	return v
}

// filterNodes keeps the nodes whose name contains filter or whose state is filter (case-insensitive); an
// empty filter keeps every node.
func filterNodes(nodes []console.NodeSummary, filter string) []console.NodeSummary {
	f := strings.ToLower(strings.TrimSpace(filter))
	if f == "" {
		return nodes
	}
	var out []console.NodeSummary
	for _, n := range nodes {
		if strings.Contains(strings.ToLower(n.Name), f) || strings.EqualFold(n.State, f) {
			out = append(out, n)
		}
	}
	return out
}

// overviewURL is the overview with a filter and a page of nodes.
func overviewURL(filter string, page int) templ.SafeURL {
	q := url.Values{}
	if filter != "" {
		q.Set("q", filter)
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	if len(q) == 0 {
		return "/"
	}
	return templ.SafeURL("/?" + q.Encode())
}

func (s *server) nodePage(w http.ResponseWriter, r *http.Request) {
	snap := s.pageSnapshot(w, r)
	if snap == nil {
		return
	}
	nv, err := console.Node(snap, chi.URLParam(r, "node"))
	if err != nil {
		status, code, msg := s.classify(r, err)
		s.errorPageOf(w, r, snap, status, headingFor(code), msg)
		return
	}
	p := s.page(r, nv.Name, "overview", snap)
	showDiff := r.URL.Query().Get("view") == "diff"
	if isFragment(r) {
		s.render(w, r, http.StatusOK, components.NodeContent(p, nv, showDiff))
		return
	}
	s.render(w, r, http.StatusOK, components.NodePage(p, nv, showDiff))
}

// deviceParam reads the device of a URL: the path after /devices/, with /dev/ put back (see
// components.DevicePath).
func deviceParam(r *http.Request) string {
	raw := chi.URLParam(r, "*")
	p, err := url.PathUnescape(raw)
	if err != nil {
		p = raw
	}
	if strings.HasPrefix(p, "/") {
		return p
	}
	return "/dev/" + p
}

func (s *server) devicePage(w http.ResponseWriter, r *http.Request) {
	snap := s.pageSnapshot(w, r)
	if snap == nil {
		return
	}
	dv, err := console.Device(snap, chi.URLParam(r, "node"), deviceParam(r))
	if err != nil {
		status, code, msg := s.classify(r, err)
		s.errorPageOf(w, r, snap, status, headingFor(code), msg)
		return
	}
	p := s.page(r, dv.KName+" on "+dv.Node, "overview", snap)
	if isFragment(r) {
		s.render(w, r, http.StatusOK, components.DeviceContent(p, dv))
		return
	}
	s.render(w, r, http.StatusOK, components.DevicePage(p, dv))
}

func (s *server) deviceClassesPage(w http.ResponseWriter, r *http.Request) {
	snap := s.pageSnapshot(w, r)
	if snap == nil {
		return
	}
	dcs, p, at := console.DeviceClasses(snap), s.page(r, "Device classes", "deviceclasses", snap), components.When(snap.At)
	if isFragment(r) {
		s.render(w, r, http.StatusOK, components.DeviceClassesContent(p, dcs, at))
		return
	}
	s.render(w, r, http.StatusOK, components.DeviceClassesPage(p, dcs, at))
}

func (s *server) volumesPage(w http.ResponseWriter, r *http.Request) {
	snap := s.pageSnapshot(w, r)
	if snap == nil {
		return
	}
	vs, p, at := console.Volumes(snap), s.page(r, "Volumes", "volumes", snap), components.When(snap.At)
	if isFragment(r) {
		s.render(w, r, http.StatusOK, components.VolumesContent(p, vs, at))
		return
	}
	s.render(w, r, http.StatusOK, components.VolumesPage(p, vs, at))
}

func (s *server) eventsPage(w http.ResponseWriter, r *http.Request) {
	snap := s.pageSnapshot(w, r)
	if snap == nil {
		return
	}
	es, p, at := console.Events(snap), s.page(r, "Events", "events", snap), components.When(snap.At)
	if isFragment(r) {
		s.render(w, r, http.StatusOK, components.EventsContent(p, es, at))
		return
	}
	s.render(w, r, http.StatusOK, components.EventsPage(p, es, at))
}
