package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/explain"
)

// apiError is the body of every JSON error.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// apiRoutes serves the same data as the pages, as JSON, for the OpenShift console plugin and scripts:
//
//	GET /api/v1/overview                      console.Overview
//	GET /api/v1/nodes                         []console.NodeSummary, worst first; optional q (name or state),
//	                                          offset and limit; X-Total-Count is the number q matches
//	GET /api/v1/nodes/{node}                  console.NodeView
//	GET /api/v1/nodes/{node}/devices/{dev}    console.DeviceView (dev without /dev/, as in page URLs)
//	GET /api/v1/deviceclasses                 []console.DeviceClassView
//	GET /api/v1/volumes                       []console.VolumeView
//	GET /api/v1/events                        []console.EventView
//	GET /api/v1/explanations                  every reason code and condition type explained
//	GET, POST /api/v1/migration/...           the migration wizard (migrationapi.go), when enabled
//
// Errors are {"error": {"status", "code", "message"}} with the HTTP status: 400 BadRequest, 401 Unauthorized,
// 403 Forbidden, 404 NotFound or NotInstalled, 405 MethodNotAllowed, 502 ClusterUnavailable.
func (s *server) apiRoutes(r chi.Router) {
	r.Get("/overview", s.api(func(snap *console.Snapshot, _ *http.Request) (any, error) { return console.BuildOverview(snap), nil }))
	r.Get("/nodes", func(w http.ResponseWriter, r *http.Request) {
		s.api(func(snap *console.Snapshot, r *http.Request) (any, error) {
			return nodesPage(w, console.BuildOverview(snap).Nodes, r.URL.Query())
		})(w, r)
	})
	r.Get("/nodes/{node}", s.api(func(snap *console.Snapshot, r *http.Request) (any, error) {
		return console.Node(snap, chi.URLParam(r, "node"))
	}))
	r.Get("/nodes/{node}/devices/*", s.api(func(snap *console.Snapshot, r *http.Request) (any, error) {
		return console.Device(snap, chi.URLParam(r, "node"), deviceParam(r))
	}))
	r.Get("/deviceclasses", s.api(func(snap *console.Snapshot, _ *http.Request) (any, error) {
		return nonNil(console.DeviceClasses(snap)), nil
	}))
	r.Get("/volumes", s.api(func(snap *console.Snapshot, _ *http.Request) (any, error) { return nonNil(console.Volumes(snap)), nil }))
	r.Get("/events", s.api(func(snap *console.Snapshot, _ *http.Request) (any, error) { return nonNil(console.Events(snap)), nil }))
	r.Get("/findings", s.findingsAPI)
	r.Get("/explanations", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, catalog()) })
	if s.opts.Migration != nil {
		r.Route("/migration", s.migrationAPIRoutes)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{apiErrorBody{http.StatusNotFound, "NotFound", "no API endpoint at " + r.URL.Path}})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, apiError{apiErrorBody{http.StatusMethodNotAllowed, "MethodNotAllowed",
			"only GET is served here: the API is read-only except for the migration wizard's steps (POST /api/v1/migration/{namespace}/{cluster}/{step})"}})
	})
}

// api wraps a view function: it reads the snapshot as the caller and writes the view or the error as JSON.
func (s *server) api(view func(*console.Snapshot, *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		snap, err := s.snapshot(r)
		if err == nil && !snap.Installed {
			err = errNotInstalled
		}
		var v any
		if err == nil {
			v, err = view(snap, r)
		}
		if err != nil {
			status, code, msg := s.classify(r, err)
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="lvms-console"`)
			}
			writeJSON(w, status, apiError{apiErrorBody{status, code, msg}})
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"status":500,"code":"Internal","message":"the response could not be encoded"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// nodesPage filters nodes by q and returns limit of them from offset (all without limit), with the number q
// matches in X-Total-Count.
func nodesPage(w http.ResponseWriter, nodes []console.NodeSummary, query url.Values) ([]console.NodeSummary, error) {
	nodes = filterNodes(nodes, query.Get("q"))
	offset, limit := 0, len(nodes)
	for _, p := range []struct {
		name string
		to   *int
	}{{"offset", &offset}, {"limit", &limit}} {
		if v := query.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, &badRequestError{p.name + " must be a number from 0, not " + strconv.Quote(v)}
			}
			*p.to = n
		}
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(len(nodes)))
	from := min(offset, len(nodes))
	return nonNil(nodes[from:min(from+limit, len(nodes))]), nil
}

// badRequestError is a query the API cannot answer (400).
type badRequestError struct{ msg string }

func (e *badRequestError) Error() string { return e.msg }

// nonNil makes empty lists encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// explanationCatalog is every explanation the console knows, for the plugin and for documentation.
type explanationCatalog struct {
	Reasons    []explain.Explanation `json:"reasons"`
	Conditions []explain.Explanation `json:"conditions"`
}

func catalog() explanationCatalog {
	var c explanationCatalog
	for _, code := range explain.Codes() {
		c.Reasons = append(c.Reasons, explain.Reason(code, explain.Context{}))
	}
	for _, t := range explain.ConditionTypes() {
		c.Conditions = append(c.Conditions, explain.Condition(t, "", "", explain.Context{}))
	}
	return c
}
