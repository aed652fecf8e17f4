package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzHandlers requests arbitrary paths and query strings from the console. Properties: no request makes
// it fail (5xx) or panic, and nothing the request carries comes back as markup (a script tag planted in
// the path or the query is escaped wherever it is echoed).
func FuzzHandlers(f *testing.F) {
	for _, seed := range []struct{ path, query string }{
		{"/", ""}, {"/nodes/worker-a", ""}, {"/nodes/worker-a/devices/dev/sdb", ""}, {"/volumes", "q=pvc"},
		{"/events", "type=Warning&q=<script>alert(1)</script>"}, {"/api/v1/nodes/worker-b", ""},
		{"/api/v1/nodes/%3Cscript%3E", ""}, {"/nodes/<script>x</script>", ""}, {"/findings", "severity=fail"},
		{"/deviceclasses", "sort=-name"}, {"/api/v1/volumes", "limit=-1"}, {"/assets/../../etc/passwd", ""},
	} {
		f.Add(seed.path, seed.query)
	}
	h := preparedServer()
	const marker = "<script>fuzz</script>"
	f.Fuzz(func(t *testing.T, path, query string) {
		for _, u := range []*url.URL{
			{Path: "/" + strings.TrimPrefix(path, "/"), RawQuery: query},
			{Path: "/nodes/" + marker + path},
			{Path: "/volumes", RawQuery: "q=" + url.QueryEscape(marker+query)},
		} {
			// Set the URL as a server would have parsed it: any bytes a client can put there.
			req := httptest.NewRequest(http.MethodGet, "http://localhost/", nil)
			req.URL, req.RequestURI = u, u.RequestURI()
			target := u.String()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body.String())
			}
			if strings.Contains(rec.Body.String(), marker) {
				t.Fatalf("GET %s: the response carries the request's markup unescaped", target)
			}
		}
	})
}
