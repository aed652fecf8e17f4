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
}
