package footprint

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoller_NamesEndpointsThatNeverAnswered(t *testing.T) {
	var scrapes atomic.Int32
	metrics := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		scrapes.Add(1)
	}))
	defer metrics.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer broken.Close()
	endpoints := []Endpoint{
		{URL: metrics.URL + "/metrics", Token: "good"},
		{URL: metrics.URL + "/metrics?as=stranger", Token: "bad"},
		{URL: broken.URL + "/readyz"},
	}
	ctx, cancel := context.WithCancel(context.Background())
	var pl Poller
	done := make(chan struct{})
	go func() { pl.Poll(ctx, time.Hour, endpoints); close(done) }()
	// The first round runs at once; Once adds a second.
	for deadline := time.Now().Add(10 * time.Second); scrapes.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	pl.Once(context.Background(), endpoints)
	if n := scrapes.Load(); n != 2 {
		t.Errorf("the good endpoint was scraped %d times, want 2 (a round at start, one by Once)", n)
	}
	missed := pl.Unanswered(endpoints)
	if len(missed) != 2 || !strings.Contains(missed[0], "401") || !strings.Contains(missed[1], "503") ||
		slices.ContainsFunc(missed, func(s string) bool { return strings.HasPrefix(s, endpoints[0].URL+":") }) {
		t.Errorf("unanswered: %q, want the stranger's scrape (401) and the readiness probe (503), not the good scrape", missed)
	}
}
