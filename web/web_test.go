package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/lvms-dev/lvms/console/explain"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/web"
)

func preparedServer() http.Handler {
	snap := console.FromObjects(consoletest.Prepared("lvms"), consoletest.At)
	snap.Cluster, snap.User = "test-cluster", "alice"
	return web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap}), Cluster: "test-cluster"})
}

// get serves one request and parses the HTML answer.
func get(t *testing.T, h http.Handler, path string, header ...string) (*httptest.ResponseRecorder, *goquery.Document) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return rec, doc
}

func testid(id string) string { return `[data-testid="` + id + `"]` }

func TestOverviewPage(t *testing.T) {
	rec, doc := get(t, preparedServer(), "/")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	var nodes []string
	doc.Find(testid("node-row")).Each(func(_ int, s *goquery.Selection) { nodes = append(nodes, s.AttrOr("data-node", "")) })
	if strings.Join(nodes, ",") != "worker-b,worker-a,worker-c" {
		t.Errorf("node rows = %v, want the three nodes, the Degraded one first", nodes)
	}
	b := doc.Find(testid("node-row") + `[data-node="worker-b"]`)
	if b.Find(testid("diff-marker")).Length() != 1 || !strings.Contains(b.Text(), "Degraded") {
		t.Errorf("worker-b row %q lacks the diff marker or its Degraded state", b.Text())
	}
	var found bool
	doc.Find(testid("difference-row")).Each(func(_ int, s *goquery.Selection) {
		if href, _ := s.Find(testid("device-link")).Attr("href"); href == "/nodes/worker-b/devices/nvme1n1" && strings.Contains(s.Text(), "Path not found") {
			found = true
		}
	})
	if !found {
		t.Errorf("no difference row links worker-b's missing /dev/nvme1n1 with its explanation: %s", doc.Find(testid("differences")).Text())
	}
	var bars []string
	doc.Find(testid("capacity-chart") + " " + testid("capacity-bar")).Each(func(_ int, s *goquery.Selection) {
		bars = append(bars, s.AttrOr("data-device-class", ""))
	})
	if strings.Join(bars, ",") != "bulk,fast,legacy" {
		t.Errorf("capacity bars = %v", bars)
	}
	if got := doc.Find(testid("owner-row")).Length(); got != 2 {
		t.Errorf("%d owner rows, want the LVMNodeSet and the LVMCluster", got)
	}
	if who := doc.Find(testid("who")).Text(); !strings.Contains(who, "test-cluster") || !strings.Contains(who, "alice") {
		t.Errorf("masthead says %q, want the cluster and the user", who)
	}
	if doc.Find(testid("live")).AttrOr("hx-trigger", "") != "every 3s" {
		t.Error("the overview does not refresh itself")
	}
}

func TestOverviewPage_Filter(t *testing.T) {
	_, doc := get(t, preparedServer(), "/?q=degraded")
	if n := doc.Find(testid("node-row")).Length(); n != 1 || doc.Find(testid("node-row")).AttrOr("data-node", "") != "worker-b" {
		t.Errorf("filter by state Degraded shows %d rows, want worker-b only", n)
	}
	if got := doc.Find(testid("live")).AttrOr("hx-get", ""); got != "/?q=degraded" {
		t.Errorf("live refresh URL %q loses the filter", got)
	}
}

func TestNodePage(t *testing.T) {
	h := preparedServer()
	rec, doc := get(t, h, "/nodes/worker-b")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	missing := doc.Find(testid("vg") + `[data-vg="vg1"] ` + testid("device-row") + `[data-device="/dev/nvme1n1"]`)
	if missing.AttrOr("data-state", "") != "missing" || missing.Find(testid("diff-marker")).Length() != 1 {
		t.Errorf("missing device row: state %q, diff markers %d", missing.AttrOr("data-state", ""), missing.Find(testid("diff-marker")).Length())
	}
	var codes []string
	doc.Find(testid("device-row") + `[data-device="/dev/sdb"] ` + testid("reason-code")).Each(func(_ int, s *goquery.Selection) { codes = append(codes, s.Text()) })
	if strings.Join(codes, ",") != "Mounted,ForeignSignature" {
		t.Errorf("/dev/sdb reason codes = %v", codes)
	}
	if doc.Find(testid("diff-view")).Length() != 0 || doc.Find(testid("show-diff")).AttrOr("href", "") != "/nodes/worker-b?view=diff" {
		t.Error("the diff should be offered on demand, not shown")
	}
	if c := doc.Find(testid("condition-row") + `[data-type="VolumeGroupsHealthy"]`); !strings.Contains(c.Text(), "A volume group is not healthy") {
		t.Errorf("failed condition lacks its explanation: %q", c.Text())
	}
	bulk := doc.Find(testid("deviceclass-row") + `[data-deviceclass="bulk"]`)
	if !strings.Contains(bulk.Text(), "bulk-storage") || bulk.Find(testid("diff-marker")).Length() == 0 {
		t.Errorf("device class bulk should show its missing StorageClass: %q", bulk.Text())
	}

	_, doc = get(t, h, "/nodes/worker-b?view=diff")
	diff := doc.Find(testid("diff-view")).Text()
	if !strings.Contains(diff, "- /dev/nvme1n1") || !strings.Contains(diff, "  /dev/nvme0n1") {
		t.Errorf("diff view %q should remove the missing device and keep the used one", diff)
	}

	_, doc = get(t, h, "/nodes/worker-a")
	pool := doc.Find(testid("thin-pool") + `[data-pool="thin-pool"]`)
	if !strings.Contains(pool.Find(testid("usage-bar")+`[data-kind="metadata"]`).Text(), "92.3%") || !strings.Contains(pool.Text(), "metadata almost full") {
		t.Errorf("thin pool at 92.3%% metadata is not flagged: %q", pool.Text())
	}
	// The bar marks the device class's threshold (the default 75 % here: the status reports none).
	if bar := pool.Find(testid("usage-bar") + `[data-kind="metadata"]`); bar.AttrOr("data-threshold", "") != "75" || !strings.Contains(bar.Text(), "limit 75%") {
		t.Errorf("metadata bar %q (threshold %q), want the 75%% limit marked", bar.Text(), bar.AttrOr("data-threshold", ""))
	}
}

func TestDevicePage(t *testing.T) {
	h := preparedServer()
	tests := []struct {
		name, path    string
		wantCodes     []string
		wantText      []string
		wantWarning   bool
		wantExcluded  []string
		wantNotEvalOf string
	}{
		{name: "mounted with a filesystem", path: "/nodes/worker-b/devices/sdb", wantCodes: []string{"Mounted", "ForeignSignature"},
			wantText:    []string{"/dev/sdb is mounted at /var/lib/data", "carries a filesystem", "wipefs --all /dev/sdb"},
			wantWarning: true, wantExcluded: []string{"Mounted", "ForeignSignature"}},
		{name: "path not found", path: "/nodes/worker-b/devices/nvme1n1", wantCodes: []string{"NotFound"},
			wantText: []string{"no device with that path exists on worker-b", "lsblk"}, wantExcluded: []string{"NotFound"}, wantNotEvalOf: "ReadOnly"},
		{name: "code from a newer agent", path: "/nodes/worker-b/devices/sdd", wantCodes: []string{consoletest.UnknownCode},
			wantText: []string{consoletest.UnknownSentence, "newer than this console"}, wantExcluded: []string{consoletest.UnknownCode}},
		{name: "read-only", path: "/nodes/worker-b/devices/sdc", wantCodes: []string{"ReadOnly"}, wantText: []string{"blockdev --getro /dev/sdc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, doc := get(t, h, tc.path)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
			}
			var codes []string
			doc.Find(testid("reason")).Each(func(_ int, s *goquery.Selection) { codes = append(codes, s.AttrOr("data-code", "")) })
			if strings.Join(codes, ",") != strings.Join(tc.wantCodes, ",") {
				t.Errorf("reasons = %v, want %v", codes, tc.wantCodes)
			}
			text := doc.Find(testid("device-page")).Text()
			for _, w := range tc.wantText {
				if !strings.Contains(text, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			if got := doc.Find(testid("destructive-warning")).Length() > 0; got != tc.wantWarning {
				t.Errorf("destructive warning shown = %v, want %v", got, tc.wantWarning)
			}
			for _, c := range tc.wantExcluded {
				if doc.Find(testid("verdict-row")+`[data-code="`+c+`"]`).AttrOr("data-outcome", "") != console.OutcomeExcluded {
					t.Errorf("verdict of %s is not excluded", c)
				}
			}
			if tc.wantNotEvalOf != "" && doc.Find(testid("verdict-row")+`[data-code="`+tc.wantNotEvalOf+`"]`).AttrOr("data-outcome", "") != console.OutcomeNotEvaluated {
				t.Errorf("verdict of %s should be not evaluated", tc.wantNotEvalOf)
			}
			if href := doc.Find(`.crumbs `+testid("node-link")).AttrOr("href", ""); href != "/nodes/worker-b" {
				t.Errorf("breadcrumb to the node = %q", href)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	h := preparedServer()
	tests := []struct {
		name, method, path string
		want               int
		wantText           string
		// wantWho is the header's cluster (and user, where the snapshot was read): the context, never
		// the placeholder "cluster" (issue 41 point 8).
		wantWho string
	}{
		{"unknown node", http.MethodGet, "/nodes/no-such-node", http.StatusNotFound, `Node "no-such-node" not found`, "test-cluster · as alice"},
		{"unknown device", http.MethodGet, "/nodes/worker-b/devices/sdzz", http.StatusNotFound, `Device "/dev/sdzz" not found on node worker-b`, "test-cluster · as alice"},
		{"device of unknown node", http.MethodGet, "/nodes/nope/devices/sdb", http.StatusNotFound, `Node "nope" not found`, "test-cluster · as alice"},
		{"unknown claim's move", http.MethodGet, "/claims/app/nope/move", http.StatusNotFound, `not found`, "test-cluster · as alice"},
		{"unknown page", http.MethodGet, "/no/such/page", http.StatusNotFound, "There is no page at /no/such/page", "test-cluster"},
		{"write attempt", http.MethodPost, "/nodes/worker-b", http.StatusMethodNotAllowed, "read-only", "test-cluster"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			doc, _ := goquery.NewDocumentFromReader(strings.NewReader(rec.Body.String()))
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d", rec.Code, tc.want)
			}
			if msg := doc.Find(testid("error-message")).Text(); !strings.Contains(msg, tc.wantText) {
				t.Errorf("message %q, want %q", msg, tc.wantText)
			}
			if doc.Find(testid("back-link")).AttrOr("href", "") != "/" {
				t.Error("no way back to the overview")
			}
			if who := strings.Join(strings.Fields(doc.Find(testid("who")).Text()), " "); who != tc.wantWho {
				t.Errorf("header names %q, want %q", who, tc.wantWho)
			}
		})
	}
}

// apiGet serves an API request and decodes the JSON body.
func apiGet(t *testing.T, h http.Handler, method, path string, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	var list []any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
			t.Fatalf("%s %s: body is not JSON: %q", method, path, rec.Body.String())
		}
		body = map[string]any{"list": list}
	}
	return rec.Code, body, rec.Header()
}

func TestAPI(t *testing.T) {
	h := preparedServer()
	tests := []struct {
		name, method, path string
		want               int
		wantCode           string
		check              func(t *testing.T, body map[string]any)
	}{
		{name: "overview", method: "GET", path: "/api/v1/overview", want: 200, check: func(t *testing.T, b map[string]any) {
			if n := len(b["nodes"].([]any)); n != 3 {
				t.Errorf("%d nodes", n)
			}
		}},
		{name: "node", method: "GET", path: "/api/v1/nodes/worker-b", want: 200, check: func(t *testing.T, b map[string]any) {
			if b["state"] != "Degraded" || len(b["volumeGroups"].([]any)) != 2 {
				t.Errorf("node = %v", b)
			}
		}},
		{name: "device", method: "GET", path: "/api/v1/nodes/worker-b/devices/sdb", want: 200, check: func(t *testing.T, b map[string]any) {
			reasons := b["entries"].([]any)[0].(map[string]any)["row"].(map[string]any)["reasons"].([]any)
			if x := reasons[1].(map[string]any)["explanation"].(map[string]any); x["warning"] == "" || x["code"] != "ForeignSignature" {
				t.Errorf("second reason = %v", x)
			}
		}},
		{name: "lists", method: "GET", path: "/api/v1/deviceclasses", want: 200, check: func(t *testing.T, b map[string]any) {
			if len(b["list"].([]any)) != 3 {
				t.Errorf("device classes = %v", b)
			}
		}},
		{name: "volumes", method: "GET", path: "/api/v1/volumes", want: 200},
		{name: "events", method: "GET", path: "/api/v1/events", want: 200},
		{name: "nodes", method: "GET", path: "/api/v1/nodes", want: 200},
		{name: "explanations", method: "GET", path: "/api/v1/explanations", want: 200, check: func(t *testing.T, b map[string]any) {
			if len(b["reasons"].([]any)) != len(explain.Codes()) {
				t.Errorf("%d reasons explained", len(b["reasons"].([]any)))
			}
		}},
		{name: "unknown node", method: "GET", path: "/api/v1/nodes/nope", want: 404, wantCode: "NotFound"},
		{name: "unknown device", method: "GET", path: "/api/v1/nodes/worker-b/devices/nope", want: 404, wantCode: "NotFound"},
		{name: "unknown endpoint", method: "GET", path: "/api/v1/nope", want: 404, wantCode: "NotFound"},
		{name: "write attempt", method: "DELETE", path: "/api/v1/nodes/worker-b", want: 405, wantCode: "MethodNotAllowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body, hdr := apiGet(t, h, tc.method, tc.path)
			if status != tc.want {
				t.Fatalf("status %d, want %d: %v", status, tc.want, body)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			if tc.wantCode != "" {
				e, _ := body["error"].(map[string]any)
				if e["code"] != tc.wantCode || e["status"] != float64(tc.want) || e["message"] == "" {
					t.Errorf("error = %v, want code %s", e, tc.wantCode)
				}
			}
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}
}

func TestAccessErrors(t *testing.T) {
	forbidden := &console.AccessError{User: "system:serviceaccount:x:bob", Resource: "lvmnodes.lvm.topolvm.io", Err: errors.New("403")}
	tests := []struct {
		name         string
		opts         web.Options
		want         int
		wantCode     string
		wantText     string
		wantTestID   string
		mustNotLeak  bool
		headerBearer string
	}{
		{name: "forbidden", opts: web.Options{Sources: web.StaticSources(console.Static{Err: forbidden})}, want: 403, wantCode: "Forbidden",
			wantText: `Forbidden: user "system:serviceaccount:x:bob" may not list lvmnodes.lvm.topolvm.io`, wantTestID: "error-page", mustNotLeak: true},
		{name: "unauthorized", opts: web.Options{Sources: web.StaticSources(console.Static{Err: &console.AccessError{Unauthorized: true}})}, want: 401,
			wantCode: "Unauthorized", wantText: "rejected the credentials", wantTestID: "error-page"},
		{name: "token required", opts: web.Options{RequireToken: true, Sources: web.StaticSources(console.Static{Snap: console.FromObjects(consoletest.Prepared("x"), consoletest.At)})},
			want: 401, wantCode: "Unauthorized", wantText: "needs a bearer token", wantTestID: "error-page", mustNotLeak: true},
		{name: "cluster unreachable", opts: web.Options{Sources: web.StaticSources(console.Static{Err: errors.New("dial tcp 10.0.0.1:6443: connection refused")}),
			Server: "https://10.0.0.1:6443"},
			want: 502, wantCode: "ClusterUnavailable", wantText: "could not read the cluster at https://10.0.0.1:6443.", wantTestID: "error-page"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := web.NewServer(tc.opts)
			rec, doc := get(t, h, "/nodes/worker-b")
			if rec.Code != tc.want || doc.Find(testid(tc.wantTestID)).Length() != 1 {
				t.Fatalf("page: status %d, want %d with %s", rec.Code, tc.want, tc.wantTestID)
			}
			if msg := doc.Find(testid("error-message")).Text(); !strings.Contains(msg, tc.wantText) {
				t.Errorf("message %q, want %q", msg, tc.wantText)
			}
			if strings.Contains(rec.Body.String(), "connection refused") {
				t.Error("the internal error reached the page")
			}
			if tc.mustNotLeak && strings.Contains(rec.Body.String(), "/dev/nvme1n1") {
				t.Error("the page shows storage data to a caller who may not read it")
			}
			status, body, hdr := apiGet(t, h, "GET", "/api/v1/nodes/worker-b")
			if e, _ := body["error"].(map[string]any); status != tc.want || e["code"] != tc.wantCode {
				t.Errorf("API: status %d body %v, want %d %s", status, body, tc.want, tc.wantCode)
			}
			if tc.want == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

func TestNotInstalled(t *testing.T) {
	h := web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: &console.Snapshot{Installed: false}})})
	rec, doc := get(t, h, "/")
	if rec.Code != 200 || !strings.Contains(doc.Find(testid("not-installed")).Text(), "LVMS is not installed") {
		t.Errorf("status %d, page %q", rec.Code, doc.Text())
	}
	status, body, _ := apiGet(t, h, "GET", "/api/v1/overview")
	if e, _ := body["error"].(map[string]any); status != 404 || e["code"] != "NotInstalled" {
		t.Errorf("API: %d %v", status, body)
	}
}

func TestRequestsActAsTheCaller(t *testing.T) {
	var tokens []string
	snap := console.FromObjects(consoletest.Prepared("x"), consoletest.At)
	h := web.NewServer(web.Options{Sources: func(_ context.Context, token string) (console.Source, error) {
		tokens = append(tokens, token)
		return console.Static{Snap: snap}, nil
	}})
	get(t, h, "/", "Authorization", "Bearer abc.def")
	get(t, h, "/")
	apiGet(t, h, "GET", "/api/v1/overview", "Authorization", "bearer xyz")
	apiGet(t, h, "GET", "/api/v1/overview", "Authorization", "Basic dXNlcjpwYXNz")
	if strings.Join(tokens, "|") != "abc.def||xyz|" {
		t.Errorf("tokens passed to the sources = %q", tokens)
	}
}

func TestLiveFragment(t *testing.T) {
	rec, doc := get(t, preparedServer(), "/nodes/worker-b", "HX-Request", "true")
	if strings.Contains(rec.Body.String(), "<html") || doc.Find("#live").Length() != 1 || doc.Find(testid("node-page")).Length() != 1 {
		t.Errorf("an htmx refresh should get the live part only: %.200s", rec.Body.String())
	}
}

func TestAssetsAndHeaders(t *testing.T) {
	h := preparedServer()
	for path, ct := range map[string]string{"/assets/" + web.HTMXFile: "text/javascript", "/assets/console.css": "text/css",
		"/plugin/plugin-entry.js": "application/javascript", "/plugin/plugin-manifest.json": "application/json"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), ct) || rec.Body.Len() < 100 {
			t.Errorf("%s: status %d, type %q, %d bytes", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
		}
	}
	rec, doc := get(t, h, "/")
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP = %q", csp)
	}
	if src := doc.Find(`script[src="/assets/` + web.HTMXFile + `"]`).Length(); src != 1 {
		t.Error("the page does not load the vendored htmx")
	}
	if strings.Contains(rec.Body.String(), "style=") || strings.Contains(rec.Body.String(), "<script>") {
		t.Error("inline styles or scripts would be blocked by the CSP")
	}
}
