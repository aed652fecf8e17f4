package browsertest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/web/browsertest"
)

// TestActsAsTheCaller: requests carrying a real, RBAC-restricted user's token see what that user may see,
// even after a request with the server's own (admin) credentials warmed the cache.
func TestActsAsTheCaller(t *testing.T) {
	testenv.Require(t)
	prepare(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	srv := serve(t)
	nobody, err := consoletest.UserToken(ctx, env.Config, env.Client, ns, "nobody", nil)
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := consoletest.UserToken(ctx, env.Config, env.Client, ns, "viewer", live.ViewerRules())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, token string
		want        int
		wantText    string
		mustNotShow string
	}{
		{name: "kubeconfig credentials", want: 200, wantText: `data-node="worker-b"`},
		{name: "user without rights", token: nobody, want: 403,
			wantText: `user &#34;system:serviceaccount:` + ns + `:nobody&#34; may not list lvmnodes.lvm.topolvm.io`, mustNotShow: "worker-b"},
		{name: "viewer", token: viewer, want: 200, wantText: `as system:serviceaccount:` + ns + `:viewer`},
		{name: "invalid token", token: "garbage", want: 401, wantText: "rejected the credentials", mustNotShow: "worker-b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/", "/api/v1/nodes/worker-b"} {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				body := string(b)
				if resp.StatusCode != tc.want {
					t.Errorf("%s: status %d, want %d: %.300s", path, resp.StatusCode, tc.want, body)
				}
				if path == "/" && !strings.Contains(body, tc.wantText) {
					t.Errorf("%s: page lacks %q: %.500s", path, tc.wantText, body)
				}
				if tc.mustNotShow != "" && strings.Contains(body, tc.mustNotShow) {
					t.Errorf("%s: a caller who may not read LVMNodes sees %q", path, tc.mustNotShow)
				}
			}
		})
	}

	// The same in a browser whose requests carry the restricted user's token.
	b := browsertest.Chromium(t)
	bctx, err := b.NewContext(playwright.BrowserNewContextOptions{ExtraHttpHeaders: map[string]string{"Authorization": "Bearer " + nobody}})
	if err != nil {
		t.Fatal(err)
	}
	page, err := bctx.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := page.Goto(srv.URL + "/nodes/worker-b"); err != nil {
		t.Fatal(err)
	}
	expect := playwright.NewPlaywrightAssertions(15000)
	if err := expect.Locator(page.GetByTestId("error-message")).ToContainText("may not list lvmnodes.lvm.topolvm.io"); err != nil {
		t.Fatal(err)
	}
	if err := expect.Locator(page.GetByTestId("back-link")).ToBeVisible(); err != nil {
		t.Fatal(err)
	}
}
