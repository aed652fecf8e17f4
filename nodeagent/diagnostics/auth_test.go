package diagnostics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAPI plays the API server's TokenReview and SubjectAccessReview: tokens maps a token to its user and
// audiences; allowed lists the users who may read diagnostics.
type fakeAPI struct {
	tokens  map[string]fakeToken
	allowed []string
	reviews int
	sars    []authzv1.SubjectAccessReviewSpec
	down    bool
}

type fakeToken struct {
	user      string
	audiences []string // nil: the API server's own
	// ignoresAudience plays an authenticator that does not support audiences (some webhooks): it
	// authenticates the token whatever audience was asked for and reports the token's own.
	ignoresAudience bool
}

func (f *fakeAPI) reviewer(clk clock.PassiveClock) *TokenReviewer {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.reviews++
		if f.down {
			return true, nil, errors.New("connection refused")
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		tok, ok := f.tokens[tr.Spec.Token]
		ok = ok && ((len(tr.Spec.Audiences) == 0 && tok.audiences == nil) ||
			(len(tr.Spec.Audiences) > 0 && slices.Contains(tok.audiences, tr.Spec.Audiences[0])))
		if ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: tok.user, Groups: []string{"team"}}, Audiences: tr.Spec.Audiences}
		}
		if tok, known := f.tokens[tr.Spec.Token]; known && tok.ignoresAudience {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: tok.user}, Audiences: tok.audiences}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		f.sars = append(f.sars, sar.Spec)
		sar.Status.Allowed = slices.Contains(f.allowed, sar.Spec.User)
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RBAC rule"
		}
		return true, sar, nil
	})
	return &TokenReviewer{Reviews: cs.AuthenticationV1().TokenReviews(), Access: cs.AuthorizationV1().SubjectAccessReviews(),
		Namespace: "lvms", Node: "node-a", Clock: clk}
}

func request(header, value string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, Path, nil)
	if header != "" {
		r.Header.Set(header, value)
	}
	return r
}

func TestTokenReviewer_Authorize(t *testing.T) {
	api := &fakeAPI{
		tokens: map[string]fakeToken{
			"admin-token":    {user: "admin"},
			"admin-minted":   {user: "admin", audiences: []string{Audience}},
			"minted-token":   {user: "system:serviceaccount:lvms:gather", audiences: []string{Audience}},
			"viewer-token":   {user: "viewer", audiences: []string{Audience}},
			"other-audience": {user: "admin", audiences: []string{"vault"}},
			"webhook-token":  {user: "admin", audiences: []string{"https://kubernetes.default.svc"}, ignoresAudience: true},
		},
		allowed: []string{"admin", "system:serviceaccount:lvms:gather"},
	}
	tests := []struct {
		name     string
		req      *http.Request
		wantUser string
		wantErr  func(error) bool
	}{
		{name: "diagnostics token in Authorization", req: request("Authorization", "Bearer admin-minted"), wantUser: "admin"},
		{name: "the caller's own API token is refused", req: request("Authorization", "Bearer admin-token"), wantErr: func(err error) bool { return errors.Is(err, ErrUnauthenticated) }},
		{name: "minted token through the proxy header", req: request(TokenHeader, "minted-token"), wantUser: "system:serviceaccount:lvms:gather"},
		{name: "no token", req: request("", ""), wantErr: func(err error) bool { return errors.Is(err, ErrNoToken) }},
		{name: "basic auth is not a token", req: request("Authorization", "Basic YWRtaW46eA=="), wantErr: func(err error) bool { return errors.Is(err, ErrNoToken) }},
		{name: "unknown token", req: request("Authorization", "Bearer forged"), wantErr: func(err error) bool { return errors.Is(err, ErrUnauthenticated) }},
		{name: "token for another audience", req: request("Authorization", "Bearer other-audience"), wantErr: func(err error) bool { return errors.Is(err, ErrUnauthenticated) }},
		{name: "authenticated, but not for the diagnostics audience", req: request("Authorization", "Bearer webhook-token"), wantErr: func(err error) bool { return errors.Is(err, ErrUnauthenticated) }},
		{name: "user without the RBAC rule", req: request("Authorization", "Bearer viewer-token"), wantUser: "viewer",
			wantErr: func(err error) bool {
				var f *ForbiddenError
				return errors.As(err, &f) && f.User == "viewer" && strings.HasSuffix(err.Error(), "(group lvm.topolvm.io): no RBAC rule")
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			user, err := api.reviewer(nil).Authorize(context.Background(), tc.req)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !tc.wantErr(err) {
				t.Fatalf("err = %v", err)
			}
			if user != tc.wantUser {
				t.Errorf("user = %q, want %q", user, tc.wantUser)
			}
		})
	}
	want := authzv1.ResourceAttributes{Namespace: "lvms", Verb: "get", Group: "lvm.topolvm.io", Resource: "lvmnodes", Subresource: "diagnostics", Name: "node-a"}
	for _, s := range api.sars {
		if *s.ResourceAttributes != want || !slices.Equal(s.Groups, []string{"team"}) {
			t.Errorf("SubjectAccessReview %+v groups %v, want %+v with the user's groups", *s.ResourceAttributes, s.Groups, want)
		}
	}
}

func TestTokenReviewer_CachesDecisionsNotOutages(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	api := &fakeAPI{tokens: map[string]fakeToken{"admin-token": {user: "admin", audiences: []string{Audience}}}, allowed: []string{"admin"}}
	rv := api.reviewer(clk)
	ctx := context.Background()
	if _, err := rv.Authorize(ctx, request("Authorization", "Bearer admin-token")); err != nil {
		t.Fatal(err)
	}
	first := api.reviews
	api.down = true
	if user, err := rv.Authorize(ctx, request("Authorization", "Bearer admin-token")); err != nil || user != "admin" {
		t.Fatalf("within the TTL the decision is reused: %q %v", user, err)
	}
	if api.reviews != first {
		t.Errorf("the cached decision asked the API server again")
	}
	clk.SetTime(clk.Now().Add(2 * DefaultCacheTTL))
	_, err := rv.Authorize(ctx, request("Authorization", "Bearer admin-token"))
	if code, _ := statusOf(err); code != http.StatusServiceUnavailable {
		t.Errorf("after the TTL with the API server down: %v (status %d), want 503", err, code)
	}
	api.down = false
	if _, err := rv.Authorize(ctx, request("Authorization", "Bearer admin-token")); err != nil {
		t.Errorf("an outage must not be cached: %v", err)
	}
}

func TestForbiddenError_WithoutReason(t *testing.T) {
	err := &ForbiddenError{User: "u", Namespace: "lvms", Node: "a"}
	if got, want := err.Error(), `user "u" may not get lvmnodes/diagnostics of LVMNode lvms/a (group lvm.topolvm.io)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
