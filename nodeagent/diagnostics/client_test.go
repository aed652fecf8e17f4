package diagnostics

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestServeAndDirectClient(t *testing.T) {
	api := &fakeAPI{tokens: map[string]fakeToken{"good": {user: "admin", audiences: []string{Audience}}, "viewer-token": {user: "viewer", audiences: []string{Audience}}, "api-token": {user: "admin"}}, allowed: []string{"admin"}}
	srv := hostLoopsServer(t, nil, validLVMD, api.reviewer(nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	fetch, done := context.WithTimeout(context.Background(), time.Minute)
	defer done()

	v, err := (&Client{Token: "good"}).Direct(fetch, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if v.Node != "node-a" || len(v.Verdicts) == 0 {
		t.Errorf("view = %+v", v)
	}
	for token, want := range map[string]string{"": "401", "forged": "401", "api-token": "401", "viewer-token": "403"} {
		_, err := (&Client{Token: token}).Direct(fetch, ln.Addr().String())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("token %q: %v, want a %s error", token, err, want)
		}
		if err != nil && strings.Contains(err.Error(), token) && token != "" {
			t.Errorf("the error repeats the token: %v", err)
		}
	}
}
