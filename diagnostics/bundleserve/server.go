package bundleserve

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/hostcheck"
)

// Server answers the Kubernetes API's read requests from one bundle. It is an http.Handler that answers any
// Host: serve it on a listener through AddressedTo. It holds no mutable state, so one Server serves any
// number of requests at once.
type Server struct {
	s *store
}

var _ http.Handler = (*Server)(nil)

// New indexes b for serving.
func New(b *bundle.Bundle) *Server { return &Server{s: newStore(b)} }

// AddressedTo is the server as a listener serves it: it answers only requests whose Host is one of hosts
// (hostcheck.Listening for the listener), and refuses the others with 403 before reading anything from the
// bundle. The API has no authentication: without the check, any web page the user visits could read the
// bundle by pointing its own name at the listener's address (DNS rebinding).
func (srv *Server) AddressedTo(hosts hostcheck.Hosts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := hosts.Check(r.Host); err != nil {
			writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
				fmt.Sprintf("Host %q refused: %v. This support bundle API has no authentication, so it answers only requests addressed to %s: "+
					"a web page could otherwise reach it by pointing its own name at this address (DNS rebinding). "+
					"Use the address in the kubeconfig `lvms bundle serve` printed, or serve under the name you use with --listen NAME:PORT.",
					r.Host, err, hosts))
			return
		}
		srv.ServeHTTP(w, r)
	})
}

// Problems are the bundle files the server could not read (the rest is served).
func (srv *Server) Problems() []string { return srv.s.problems }

// ServeHTTP answers one request.
func (srv *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("%s %s refused: this API serves the support bundle %s, which is read-only; change the live cluster instead",
				r.Method, r.URL.Path, srv.s.name))
		return
	}
	segs := splitPath(r.URL.Path)
	switch {
	case len(segs) == 1 && (segs[0] == "healthz" || segs[0] == "livez" || segs[0] == "readyz"):
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	case len(segs) == 1 && segs[0] == "version":
		writeJSON(w, http.StatusOK, srv.version())
	case len(segs) >= 1 && segs[0] == "openapi":
		// Only writes need the schema (kubectl apply validates against it before writing): answer as the
		// write would be, so that the message kubectl prints says why.
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			"the support bundle "+srv.s.name+" is served read-only, without an OpenAPI schema: writes (kubectl apply) are refused")
	case len(segs) >= 1 && segs[0] == "api":
		srv.serveGroup(w, r, "", segs[1:])
	case len(segs) >= 1 && segs[0] == "apis":
		srv.serveNamed(w, r, segs[1:])
	default:
		notFound(w)
	}
}

// splitPath splits a URL path into segments, dropping empty ones (as the API server's routing does for a
// trailing slash).
func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (srv *Server) version() version.Info {
	v := version.Info{GitVersion: srv.s.version}
	if major, minor, ok := strings.Cut(strings.TrimPrefix(srv.s.version, "v"), "."); ok {
		v.Major = major
		v.Minor, _, _ = strings.Cut(minor, ".")
	}
	return v
}

// serveNamed answers /apis, /apis/<group> and what is under a group version.
func (srv *Server) serveNamed(w http.ResponseWriter, r *http.Request, segs []string) {
	switch len(segs) {
	case 0:
		if srv.discoveryAcceptable(w, r) {
			writeJSON(w, http.StatusOK, srv.s.apiGroups())
		}
	case 1:
		g, ok := srv.s.group(segs[0])
		if !ok {
			notFound(w)
			return
		}
		if srv.discoveryAcceptable(w, r) {
			writeJSON(w, http.StatusOK, g)
		}
	default:
		srv.serveGroup(w, r, segs[0], segs[1:])
	}
}

// serveGroup answers /api (group ""), /api/<version> and /apis/<group>/<version>, and resource requests
// under them; segs start at the version.
func (srv *Server) serveGroup(w http.ResponseWriter, r *http.Request, group string, segs []string) {
	if group == "" && len(segs) == 0 {
		if srv.discoveryAcceptable(w, r) {
			writeJSON(w, http.StatusOK, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
				ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
		}
		return
	}
	gv := schema.GroupVersion{Group: group, Version: segs[0]}
	list, ok := srv.s.lists[gv.String()]
	if !ok {
		notFound(w)
		return
	}
	if len(segs) == 1 {
		if srv.discoveryAcceptable(w, r) {
			writeJSON(w, http.StatusOK, list)
		}
		return
	}
	req, ok := parseResourcePath(segs[1:])
	if !ok {
		notFound(w)
		return
	}
	res, ok := srv.s.byGVR[gv.WithResource(req.resource)]
	if !ok || (req.namespace != "" && !res.api.Namespaced) {
		notFound(w)
		return
	}
	if req.subresource == "log" && group == "" && req.resource == "pods" && req.namespace != "" {
		srv.serveLog(w, r, res, req)
		return
	}
	if req.subresource != "" {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("a support bundle serves no %s/%s: it holds objects, and pods' logs",
				req.resource, req.subresource))
		return
	}
	srv.serveResource(w, r, res, req)
}

// resourceRequest is a resource path: [namespaces/<ns>/]<resource>[/<name>[/<subresource>]].
type resourceRequest struct {
	namespace, resource, name, subresource string
}

func parseResourcePath(segs []string) (resourceRequest, bool) {
	var req resourceRequest
	// namespaces/<ns>/<resource>...: a namespaced resource; namespaces and namespaces/<ns> are the
	// Namespace resource itself.
	if segs[0] == "namespaces" && len(segs) >= 3 {
		req.namespace, segs = segs[1], segs[2:]
	}
	req.resource = segs[0]
	switch len(segs) {
	case 1:
	case 2:
		req.name = segs[1]
	case 3:
		req.name, req.subresource = segs[1], segs[2]
	default:
		return req, false
	}
	return req, true
}

// serveResource answers a GET of one object or a list (a watch ends at once: a bundle does not change).
func (srv *Server) serveResource(w http.ResponseWriter, r *http.Request, res *resource, req resourceRequest) {
	q := r.URL.Query()
	asTable, tableVersion, ok := negotiate(r.Header.Get("Accept"))
	if !ok {
		writeStatus(w, http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
			fmt.Sprintf("Accept %q: this server answers application/json, and Tables as application/json;as=Table;v=v1;g=meta.k8s.io",
				r.Header.Get("Accept")))
		return
	}
	include := metav1.IncludeObjectPolicy(q.Get("includeObject"))
	switch include {
	case "":
		include = metav1.IncludeMetadata
	case metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
	default:
		badRequest(w, fmt.Sprintf("includeObject=%q: use None, Metadata or Object", include))
		return
	}
	if req.name != "" {
		u := res.find(req.namespace, req.name)
		if u == nil {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
				fmt.Sprintf("%s %q not found", schema.GroupResource{Group: res.gv.Group, Resource: res.api.Name}.String(), req.name))
			return
		}
		if asTable {
			writeJSON(w, http.StatusOK, srv.s.table(res, []*unstructured.Unstructured{u}, include, tableVersion))
		} else {
			writeJSON(w, http.StatusOK, u.Object)
		}
		return
	}
	sel, err := parseSelectors(q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	if watch, _ := strconv.ParseBool(q.Get("watch")); watch {
		w.Header().Set("Warning", warning("a support bundle does not change: the watch ends at once"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		return
	}
	if !res.collected {
		w.Header().Set("Warning", warning(fmt.Sprintf("the support bundle does not hold %s (lvms bundle does not collect them): this list is empty",
			schema.GroupResource{Group: res.gv.Group, Resource: res.api.Name})))
	}
	objs := res.list(req.namespace, sel)
	if asTable {
		writeJSON(w, http.StatusOK, srv.s.table(res, objs, include, tableVersion))
		return
	}
	items := make([]any, 0, len(objs))
	for _, u := range objs {
		items = append(items, u.Object)
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": res.gv.String(), "kind": res.api.Kind + "List",
		"metadata": map[string]any{"resourceVersion": ""}, "items": items})
}

// warning is an HTTP Warning header value, which kubectl prints as "Warning: <text>".
func warning(text string) string { return "299 - " + strconv.Quote(text) }

// selectors are a list request's label and field selectors.
type selectors struct {
	labels labels.Selector
	fields fields.Selector
}

func parseSelectors(label, field string) (selectors, error) {
	l, err := labels.Parse(label)
	if err != nil {
		return selectors{}, fmt.Errorf("labelSelector %q: %v", label, err)
	}
	f, err := fields.ParseSelector(field)
	if err != nil {
		return selectors{}, fmt.Errorf("fieldSelector %q: %v", field, err)
	}
	return selectors{labels: l, fields: f}, nil
}

// find returns the object namespace/name, nil when the bundle does not hold it.
func (res *resource) find(namespace, name string) *unstructured.Unstructured {
	for _, u := range res.objects {
		if u.GetName() == name && (!res.api.Namespaced || u.GetNamespace() == namespace) {
			return u
		}
	}
	return nil
}

// list returns the objects of namespace ("" for all) the selectors match, in order.
func (res *resource) list(namespace string, sel selectors) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range res.objects {
		if namespace != "" && u.GetNamespace() != namespace {
			continue
		}
		if !sel.labels.Matches(labels.Set(u.GetLabels())) || !sel.fields.Matches(fieldSet(u, sel.fields)) {
			continue
		}
		out = append(out, u)
	}
	return out
}

// fieldSet holds the fields a selector asks about, read from the object by path (metadata.name,
// spec.nodeName, involvedObject.uid...); a missing field is the empty string, as the API server's are.
func fieldSet(u *unstructured.Unstructured, sel fields.Selector) fields.Set {
	set := fields.Set{}
	for _, req := range sel.Requirements() {
		v, found, err := unstructured.NestedFieldNoCopy(u.Object, strings.Split(req.Field, ".")...)
		if !found || err != nil {
			set[req.Field] = ""
			continue
		}
		switch v := v.(type) {
		case string:
			set[req.Field] = v
		case bool, int64, float64:
			set[req.Field] = fmt.Sprint(v)
		default:
			set[req.Field] = ""
		}
	}
	return set
}

// negotiate reads Accept: whether a Table is wanted (and its meta.k8s.io version), or plain JSON; ok is
// false when the client accepts neither.
func negotiate(accept string) (table bool, tableVersion string, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return false, "", true
	}
	jsonOK := false
	for _, clause := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		switch {
		case mt == "application/json" && params["as"] == "Table" && params["g"] == "meta.k8s.io" &&
			(params["v"] == "v1" || params["v"] == "v1beta1"):
			return true, params["v"], true
		case (mt == "application/json" && params["as"] == "") || mt == "*/*" || mt == "application/*":
			jsonOK = true
		}
	}
	return false, "", jsonOK
}

// discoveryAcceptable answers 406 unless the client takes plain JSON discovery documents; clients asking
// for aggregated discovery list plain JSON as their fallback, which is what this server serves.
func (srv *Server) discoveryAcceptable(w http.ResponseWriter, r *http.Request) bool {
	accept := r.Header.Get("Accept")
	if strings.TrimSpace(accept) == "" {
		return true
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err == nil && ((mt == "application/json" && params["as"] == "") || mt == "*/*" || mt == "application/*") {
			return true
		}
	}
	writeStatus(w, http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		fmt.Sprintf("Accept %q: this server answers discovery as application/json only", accept))
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		// Every value written is built from decoded JSON or API types: this cannot fail on bundle input.
		code, data = http.StatusInternalServerError, []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"encode the response","code":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: reason, Code: int32(code)})
}

func notFound(w http.ResponseWriter) {
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

func badRequest(w http.ResponseWriter, msg string) {
	writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, msg)
}
