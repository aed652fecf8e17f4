package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
)

// A console that reads with the kubeconfig's credentials answers only requests addressed to a loopback
// name: a page on evil.example that resolves its own name to 127.0.0.1 (DNS rebinding) gets nothing.
func TestLocalOnly_RefusesOtherHosts(t *testing.T) {
	snap := console.FromObjects(consoletest.Prepared("lvms"), consoletest.At)
	h := web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap}), LocalOnly: true})
	for host, want := range map[string]int{
		"localhost:8080": http.StatusOK, "127.0.0.1:8080": http.StatusOK, "[::1]:8080": http.StatusOK, "localhost": http.StatusOK,
		"evil.example:8080": http.StatusMisdirectedRequest, "127.0.0.1.nip.io:8080": http.StatusMisdirectedRequest,
		"10.0.0.5:8080": http.StatusMisdirectedRequest, "": http.StatusMisdirectedRequest,
	} {
		for _, path := range []string{"/", "/api/v1/nodes"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Host = host
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("Host %q %s: %d, want %d", host, path, rec.Code, want)
			}
			if want != http.StatusOK && (!strings.Contains(rec.Body.String(), "--require-token") || strings.Contains(rec.Body.String(), "worker-a")) {
				t.Errorf("Host %q %s: body %q should say how to fix it and show no cluster data", host, path, rec.Body.String())
			}
		}
	}
}
