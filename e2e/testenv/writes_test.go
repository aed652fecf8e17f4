package testenv

import "testing"

func TestResourcePath(t *testing.T) {
	for in, want := range map[string]string{
		"/api/v1/namespaces/ns/pods/p/status":                          "/api/v1/namespaces/*/pods/*/status",
		"/api/v1/namespaces/ns/pods":                                   "/api/v1/namespaces/*/pods",
		"/api/v1/nodes/n1":                                             "/api/v1/nodes/*",
		"/api/v1/namespaces/ns":                                        "/api/v1/namespaces/*",
		"/apis/lvm.topolvm.io/v2alpha1/namespaces/x/lvmnodes/a/status": "/apis/lvm.topolvm.io/v2alpha1/namespaces/*/lvmnodes/*/status",
		"/apis/storage.k8s.io/v1/csistoragecapacities":                 "/apis/storage.k8s.io/v1/csistoragecapacities",
		"/apis/topolvm.io/v1/logicalvolumes/lv1":                       "/apis/topolvm.io/v1/logicalvolumes/*",
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/l":          "/apis/coordination.k8s.io/v1/namespaces/*/leases/*",
	} {
		if got := resourcePath(in); got != want {
			t.Errorf("resourcePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWrites(t *testing.T) {
	var w Writes
	before := w.Snapshot()
	w.add("PATCH /apis/lvm.topolvm.io/v2alpha1/namespaces/*/lvmnodes/*/status")
	w.add("PATCH /apis/lvm.topolvm.io/v2alpha1/namespaces/*/lvmnodes/*/status")
	if w.CountSince(before) != 2 {
		t.Fatalf("CountSince = %d, want 2", w.CountSince(before))
	}
	w.add("PUT /apis/coordination.k8s.io/v1/namespaces/*/leases/*")
	if w.Total() != 2 || w.Leases() != 1 {
		t.Fatalf("Total %d Leases %d, want 2 and 1", w.Total(), w.Leases())
	}
	if got, want := w.Since(before), "2× PATCH /apis/lvm.topolvm.io/v2alpha1/namespaces/*/lvmnodes/*/status"; got != want {
		t.Fatalf("Since = %q, want %q", got, want)
	}
	w.add("PATCH /apis/lvm.topolvm.io/v2alpha1/namespaces/*/lvmnodesets/*/status")
	for _, c := range []struct {
		fragments []string
		want      int
	}{{nil, 3}, {[]string{"/lvmnodesets/*/status"}, 1}, {[]string{"/lvmnodes/"}, 2}, {[]string{"/lvmnodes/", "/lvmnodesets/"}, 3}, {[]string{"/leases/"}, 0}} {
		if got := w.CountSince(before, c.fragments...); got != c.want {
			t.Errorf("CountSince(%q) = %d, want %d", c.fragments, got, c.want)
		}
	}
}

func TestSumWrites(t *testing.T) {
	metrics := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 900
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="POST",version="v1"} 500
apiserver_request_total{code="200",component="apiserver",dry_run="",group="lvm.topolvm.io",resource="lvmnodes",scope="resource",subresource="status",verb="PATCH",version="v2alpha1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="lvm.topolvm.io",resource="lvmnodes",scope="resource",subresource="",verb="APPLY",version="v2alpha1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="DELETE",version="v1"} 3
apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="WATCH",version="v1"} 30
`
	got, err := sumWrites(metrics)
	if err != nil || got != 550 {
		t.Errorf("sumWrites = %d, %v; want 550 (POST 500 + PATCH 40 + APPLY 7 + DELETE 3; GET, WATCH and Leases apart)", got, err)
	}
	if _, err := sumWrites("# nothing\n"); err == nil {
		t.Error("metrics without apiserver_request_total: no error")
	}
}
