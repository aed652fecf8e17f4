package bundleserve_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/diagnostics/bundleserve"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
)

const operatorPod = "lvms-operator-7d9f"

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// handMade serves the hand-made healthy bundle, which has no recorded discovery or tables (as bundles from
// before the collector recorded them): discovery comes from the built-in kinds and the bundle's objects.
// worker-a was created three hours before the bundle's time; the operator's pod has a log.
func handMade(t testing.TB) http.Handler {
	t.Helper()
	s := bundletest.Healthy()
	logPath, err := bundle.LogPath(bundletest.Namespace, operatorPod, "operator", false)
	if err != nil {
		t.Fatal(err)
	}
	s.Extra = map[string]string{logPath: "one\ntwo\nthree\n"}
	bundletest.Find[*corev1.Node](s, bundletest.NodeA).CreationTimestamp = metav1.NewTime(bundletest.At.Add(-3 * time.Hour))
	return bundleserve.New(s.Bundle(t))
}

type response struct {
	code    int
	body    string
	warning string
}

func do(t testing.TB, h http.Handler, method, target, accept string) response {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader("{}"))
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return response{code: rec.Code, body: string(body), warning: rec.Header().Get("Warning")}
}

func status(t *testing.T, r response) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal([]byte(r.body), &st); err != nil || st.Kind != "Status" {
		t.Fatalf("response %d %q is not a Status: %v", r.code, r.body, err)
	}
	return st
}

func TestServer_RefusesEveryWrite(t *testing.T) {
	h := handMade(t)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, target := range []string{"/api/v1/nodes/worker-a", "/apis/lvm.topolvm.io/v2alpha1/namespaces/lvms/lvmnodes", "/no/such/path"} {
			r := do(t, h, method, target, "")
			st := status(t, r)
			if r.code != http.StatusMethodNotAllowed || st.Reason != metav1.StatusReasonMethodNotAllowed || !strings.Contains(st.Message, "read-only") {
				t.Errorf("%s %s = %d %q; want 405 saying the bundle is read-only", method, target, r.code, st.Message)
			}
		}
	}
}

func TestServer_Reads(t *testing.T) {
	h := handMade(t)
	for _, tc := range []struct {
		name, target, accept string
		wantCode             int
		want                 []string // in the body
		wantNot              []string
		wantWarning          string
	}{
		{name: "the core group's resources, with short names", target: "/api/v1", wantCode: 200,
			want: []string{`"name":"nodes"`, `"shortNames":["no"]`, `"kind":"Node"`}},
		{name: "the bundle's own kinds", target: "/apis/lvm.topolvm.io/v2alpha1", wantCode: 200,
			want: []string{`"name":"lvmnodes"`, `"kind":"LVMNode"`, `"namespaced":true`}},
		{name: "groups without the core group", target: "/apis", wantCode: 200, want: []string{`"name":"lvm.topolvm.io"`, `"name":"storage.k8s.io"`},
			wantNot: []string{`"name":""`}},
		{name: "a list", target: "/api/v1/nodes", wantCode: 200, want: []string{`"kind":"NodeList"`, `"name":"worker-a"`, `"name":"worker-b"`}},
		{name: "a label selector", target: "/api/v1/nodes?labelSelector=" + url.QueryEscape("kubernetes.io/hostname=worker-b"), wantCode: 200,
			want: []string{`"name":"worker-b"`}, wantNot: []string{`"name":"worker-a"`}},
		{name: "a field selector", target: "/apis/lvm.topolvm.io/v2alpha1/lvmnodes?fieldSelector=metadata.name%3Dworker-a", wantCode: 200,
			want: []string{`"name":"worker-a"`}, wantNot: []string{`"name":"worker-b"`}},
		{name: "a field selector on a nested field", target: "/apis/lvm.topolvm.io/v2alpha1/namespaces/lvms/lvmnodes?fieldSelector=metadata.namespace%3Dother", wantCode: 200,
			wantNot: []string{`"name":"worker-`}},
		{name: "one object", target: "/apis/lvm.topolvm.io/v2alpha1/namespaces/lvms/lvmnodes/worker-b", wantCode: 200,
			want: []string{`"kind":"LVMNode"`, `"name":"worker-b"`}},
		{name: "a table without recorded cells: NAME and AGE at the bundle's time", target: "/api/v1/nodes/worker-a", accept: tableAccept, wantCode: 200,
			want: []string{`"kind":"Table"`, `"name":"Age"`, `"cells":["worker-a","3h"]`, `"kind":"PartialObjectMetadata"`}},
		{name: "a kind the bundle does not hold is empty, with a warning", target: "/api/v1/configmaps", wantCode: 200,
			want: []string{`"items":[]`}, wantWarning: "does not hold configmaps"},
		{name: "a watch ends at once", target: "/api/v1/nodes?watch=true", wantCode: 200, wantWarning: "watch ends"},
		{name: "an object the bundle does not hold", target: "/api/v1/nodes/worker-z", wantCode: 404, want: []string{`nodes \"worker-z\" not found`}},
		{name: "an unknown resource", target: "/api/v1/widgets", wantCode: 404, want: []string{"could not find the requested resource"}},
		{name: "a bad label selector", target: "/api/v1/nodes?labelSelector=" + url.QueryEscape("a in (b"), wantCode: 400, want: []string{"labelSelector"}},
		{name: "a bad field selector", target: "/api/v1/nodes?fieldSelector=" + url.QueryEscape("a~b"), wantCode: 400, want: []string{"fieldSelector"}},
		{name: "a bad includeObject", target: "/api/v1/nodes?includeObject=All", accept: tableAccept, wantCode: 400, want: []string{"use None, Metadata or Object"}},
		{name: "a container log", target: "/api/v1/namespaces/lvms/pods/" + operatorPod + "/log", wantCode: 200, want: []string{"one\ntwo\nthree\n"}},
		{name: "its last lines", target: "/api/v1/namespaces/lvms/pods/" + operatorPod + "/log?container=operator&tailLines=2", wantCode: 200,
			want: []string{"two\nthree\n"}, wantNot: []string{"one"}},
		{name: "a log the bundle does not hold", target: "/api/v1/namespaces/lvms/pods/" + operatorPod + "/log?previous=true", wantCode: 404,
			want: []string{"no previous log of container"}},
		{name: "protobuf only", target: "/api/v1/nodes", accept: "application/vnd.kubernetes.protobuf", wantCode: 406, want: []string{"application/json"}},
		{name: "aggregated discovery only", target: "/apis", accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", wantCode: 406},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, h, http.MethodGet, tc.target, tc.accept)
			if r.code != tc.wantCode {
				t.Fatalf("GET %s = %d %s; want %d", tc.target, r.code, r.body, tc.wantCode)
			}
			if r.code >= 400 {
				status(t, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.body, w) {
					t.Errorf("GET %s lacks %s:\n%s", tc.target, w, r.body)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(r.body, w) {
					t.Errorf("GET %s has %s:\n%s", tc.target, w, r.body)
				}
			}
			if !strings.Contains(r.warning, tc.wantWarning) || (tc.wantWarning == "" && r.warning != "") {
				t.Errorf("GET %s warning %q; want %q", tc.target, r.warning, tc.wantWarning)
			}
		})
	}
}

func TestKubeconfig_ReachesTheServer(t *testing.T) {
	kc, err := bundleserve.Kubeconfig("http://127.0.0.1:4321", "lvms-bundle")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server: http://127.0.0.1:4321", "current-context: lvms-bundle"} {
		if !strings.Contains(string(kc), want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, kc)
		}
	}
}

// FuzzServer: whatever the request, the server answers with a Status or a document, never a 5xx, and every
// write is refused with 405.
func FuzzServer(f *testing.F) {
	for _, seed := range []struct{ method, target, accept string }{
		{"GET", "/api/v1/nodes?labelSelector=storage%3Dtrue", ""},
		{"GET", "/apis/lvm.topolvm.io/v2alpha1/namespaces/lvms/lvmnodes/worker-a", tableAccept},
		{"GET", "/api/v1/namespaces/lvms/events?fieldSelector=involvedObject.kind%3DLVMNode%2CinvolvedObject.name%3Dworker-a", tableAccept},
		{"GET", "/api/v1/nodes?watch=1&includeObject=Object", tableAccept},
		{"DELETE", "/api/v1/nodes/worker-a", ""},
		{"GET", "/apis/lvm.topolvm.io/v2alpha1/namespaces/lvms/lvmnodes/worker-a/status", ""},
	} {
		f.Add(seed.method, seed.target, seed.accept)
	}
	h := handMade(f)
	f.Fuzz(func(t *testing.T, method, target, accept string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || method == "" || strings.ContainsAny(method, " \t\r\n()<>@,;:\\\"/[]?={}") {
			return
		}
		req := &http.Request{Method: method, URL: u, Header: http.Header{"Accept": {accept}}, Host: "bundle"}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s (Accept %q) = %d %s", method, target, accept, rec.Code, rec.Body)
		}
		if method != http.MethodGet && method != http.MethodHead && rec.Code != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s = %d; want 405", method, target, rec.Code)
		}
		if rec.Code >= 400 && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s = %d with a body that is not a Status: %q", method, target, rec.Code, rec.Body)
		}
	})
}
