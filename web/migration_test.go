package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/lvms-dev/lvms/api"
	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/migrate/wizard"
	"github.com/lvms-dev/lvms/web"
)

// wizardServer serves the wizard over a fake API whose access reviews allow nothing: every step the state
// allows is shown disabled with what the caller lacks. It counts the callers' clients asked for.
func wizardServer(t *testing.T) (http.Handler, *int) {
	t.Helper()
	cl := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "my-lvmcluster", Namespace: "openshift-storage"},
		Spec: lvmv1.LVMClusterSpec{Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{{Name: "vg1", Default: true,
			ThinPoolConfig: &lvmv1.ThinPoolConfig{Name: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10}}}}}}
	// The fake API server answers every access review with "no" (it cannot store reviews).
	deny := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*authv1.SelfSubjectAccessReview); ok {
			return nil
		}
		return c.Create(ctx, obj, opts...)
	}}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(cl).WithInterceptorFuncs(deny).Build()
	calls := 0
	snap := console.FromObjects(consoletest.Prepared("lvms"), consoletest.At)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := web.NewServer(web.Options{Sources: web.StaticSources(console.Static{Snap: snap}), Migration: &web.Migration{
		Clients: func(context.Context, string) (client.Client, error) { calls++; return c, nil },
		Runner:  wizard.NewRunner(ctx, nil),
	}})
	return h, &calls
}

func post(h http.Handler, path string, form url.Values, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestWizard_PageShowsStepsAndWhatIsMissing: the wizard page shows the plan, each step with why it is or is
// not offered, and every permission the caller lacks; the buttons are disabled.
func TestWizard_PageShowsStepsAndWhatIsMissing(t *testing.T) {
	h, _ := wizardServer(t)
	if rec, _ := get(t, h, "/migration"); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/migration/openshift-storage/my-lvmcluster" {
		t.Errorf("/migration with one LVMCluster: %d to %q, want 303 to its wizard", rec.Code, rec.Header().Get("Location"))
	}
	rec, doc := get(t, h, "/migration/openshift-storage/my-lvmcluster")
	if rec.Code != http.StatusOK || doc.Find(`[data-testid="migration"]`).Length() != 1 {
		t.Fatalf("the wizard: %d: %.400s", rec.Code, rec.Body.String())
	}
	if !strings.Contains(doc.Find(`[data-testid="plan-report"]`).Text(), "my-lvmcluster") {
		t.Errorf("no plan report: %q", doc.Find(`[data-testid="plan-report"]`).Text())
	}
	pre := doc.Find(`[data-testid="step"][data-step="preflight"]`)
	if pre.AttrOr("data-enabled", "") != "false" || pre.Find(`button[disabled]`).Length() != 1 {
		t.Errorf("preflight is offered to a caller who may do nothing: %s", pre.Text())
	}
	missing := pre.Find(`[data-testid="missing-permission"]`).Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	if !containsString(missing, "patch lvmclusters.lvm.topolvm.io in namespace openshift-storage") {
		t.Errorf("preflight's missing permissions %v do not name the patch of the LVMCluster", missing)
	}
	apply := doc.Find(`[data-testid="step"][data-step="apply"]`)
	if !strings.Contains(apply.Find(`[data-testid="step-why"]`).Text(), "run preflight first") {
		t.Errorf("apply does not say why it is not offered: %q", apply.Text())
	}
	if doc.Find(`nav a[href="/migration"]`).Length() != 1 {
		t.Error("no Migration entry in the navigation")
	}
}

// TestWizard_WritesAreProtected: a step is taken only by POST, from the console's own origin, with the
// caller's CSRF token, and only when the API server says the caller may.
func TestWizard_WritesAreProtected(t *testing.T) {
	h, calls := wizardServer(t)
	_, doc := get(t, h, "/migration/openshift-storage/my-lvmcluster")
	csrf := doc.Find(`[data-step="preflight"] input[name="csrf"]`).AttrOr("value", "")
	if csrf == "" {
		t.Fatal("the preflight form carries no CSRF token")
	}
	_, other := get(t, h, "/migration/openshift-storage/my-lvmcluster", "Authorization", "Bearer someone-else")
	otherCSRF := other.Find(`[data-step="preflight"] input[name="csrf"]`).AttrOr("value", "")
	if otherCSRF == "" || otherCSRF == csrf {
		t.Fatalf("two callers share a CSRF token (%q, %q)", csrf, otherCSRF)
	}
	const path = "/migration/openshift-storage/my-lvmcluster/preflight"
	self := "http://example.com" // httptest.NewRequest's Host
	tests := []struct {
		name   string
		form   url.Values
		header []string
		want   int
		text   string
	}{
		{"no origin", url.Values{"csrf": {csrf}}, nil, 403, "no Origin header"},
		{"another site", url.Values{"csrf": {csrf}}, []string{"Origin", "http://evil.example"}, 403, "comes from http://evil.example"},
		{"cross-site fetch", url.Values{"csrf": {csrf}}, []string{"Origin", self, "Sec-Fetch-Site", "cross-site"}, 403, "cross-site page"},
		{"no token", url.Values{}, []string{"Origin", self}, 403, "CSRF token is missing or not yours"},
		{"another caller's token", url.Values{"csrf": {otherCSRF}}, []string{"Origin", self}, 403, "CSRF token is missing or not yours"},
		{"unknown step", url.Values{"csrf": {csrf}}, []string{"Origin", self}, 404, "no step"},
		{"allowed through, refused by RBAC", url.Values{"csrf": {csrf}}, []string{"Origin", self, "Sec-Fetch-Site", "same-origin"}, 403, "You may not preflight this migration: you lack"},
		{"through a proxy", url.Values{"csrf": {csrf}}, []string{"Origin", "https://console.apps.example", "X-Forwarded-Host", "console.apps.example"}, 403, "you lack"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := *calls
			p := path
			if tc.name == "unknown step" {
				p = "/migration/openshift-storage/my-lvmcluster/wipe"
			}
			rec := post(h, p, tc.form, tc.header...)
			body := strings.ReplaceAll(rec.Body.String(), "&#34;", `"`)
			if rec.Code != tc.want || !strings.Contains(body, tc.text) {
				t.Errorf("status %d, want %d with %q: %.600s", rec.Code, tc.want, tc.text, body)
			}
			if reached := *calls > before; reached != strings.Contains(tc.text, "lack") {
				t.Errorf("the caller's client was asked for: %v (a refused write must not reach the API)", reached)
			}
		})
	}
	if rec, _ := get(t, h, path); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET of a step: %d, want 405", rec.Code)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestWizardAPI: the plugin's JSON view of the wizard lists the steps with what the caller lacks and a CSRF
// token; a step is posted only with that token in X-LVMS-CSRF, never from another site, and only when the
// API server says the caller may.
func TestWizardAPI(t *testing.T) {
	h, calls := wizardServer(t)
	const base = "/api/v1/migration/openshift-storage/my-lvmcluster"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, base, nil))
	var got struct {
		CSRF  string `json:"csrf"`
		Lossy int    `json:"lossy"`
		Steps []struct {
			Action  string   `json:"action"`
			Enabled bool     `json:"enabled"`
			Why     string   `json:"why"`
			Missing []string `json:"missing"`
		} `json:"steps"`
		PlanText string `json:"planText"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %.300s", base, rec.Code, err, rec.Body.String())
	}
	if got.CSRF == "" || !strings.Contains(got.PlanText, "my-lvmcluster") || len(got.Steps) != 5 {
		t.Fatalf("the view lacks the token, the plan or the steps: %+v", got)
	}
	for _, st := range got.Steps {
		if st.Action == "preflight" && (st.Enabled || !containsString(st.Missing, "patch lvmclusters.lvm.topolvm.io in namespace openshift-storage")) {
			t.Errorf("preflight for a caller who may do nothing: %+v", st)
		}
	}
	postJSON := func(header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, base+"/preflight", strings.NewReader(`{"acceptLossy":true}`))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, tc := range []struct {
		name   string
		header []string
		want   int
		text   string
	}{
		{"no token", nil, 403, "X-LVMS-CSRF header is missing or not yours"},
		{"another caller's token", []string{"X-LVMS-CSRF", "not-it"}, 403, "not yours"},
		{"from another site", []string{"X-LVMS-CSRF", got.CSRF, "Sec-Fetch-Site", "cross-site"}, 403, "cross-site page"},
		{"refused by RBAC", []string{"X-LVMS-CSRF", got.CSRF, "Sec-Fetch-Site", "same-origin"}, 403, "You may not preflight this migration: you lack"},
	} {
		before := *calls
		rec := postJSON(tc.header...)
		if rec.Code != tc.want || !strings.Contains(rec.Body.String(), tc.text) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, rec.Code, rec.Body.String(), tc.want, tc.text)
		}
		if reached := *calls > before; reached != strings.Contains(tc.text, "lack") {
			t.Errorf("%s: the caller's client was asked for: %v", tc.name, reached)
		}
	}
}

// The list of LVMClusters a migration can start from is camelCase JSON like the rest of the API.
func TestWizardAPI_ListIsCamelCase(t *testing.T) {
	h, _ := wizardServer(t)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/migration", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/migration: %d %s", rec.Code, rec.Body.String())
	}
	var got []map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got) == 0 {
		t.Fatalf("GET /api/v1/migration: %v %s", err, rec.Body.String())
	}
	if got[0]["namespace"] != "openshift-storage" || got[0]["name"] != "my-lvmcluster" || got[0]["Namespace"] != nil {
		t.Errorf("GET /api/v1/migration = %s, want [{\"namespace\": ..., \"name\": ...}]", rec.Body.String())
	}
}
