package plan_test

import (
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/migrate/plan"
)

const twoClusters = `apiVersion: lvm.topolvm.io/v1alpha1
kind: LVMCluster
metadata: {name: a, namespace: ns1}
spec: {storage: {deviceClasses: [{name: vg1}]}}
---
# a comment-only document and an object of another kind are skipped
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
---
apiVersion: lvm.topolvm.io/v1alpha1
kind: LVMCluster
metadata: {name: b, namespace: ns2}
spec: {storage: {deviceClasses: [{name: vg1}]}}
`

func TestDecode(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		clusters int
		classes  bool
		wantErr  string
	}{
		{"multi-document YAML", twoClusters, 2, false, ""},
		{"JSON object", `{"apiVersion":"lvm.topolvm.io/v1alpha1","kind":"LVMCluster","metadata":{"name":"a"}}`, 1, false, ""},
		{"List with classes", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"s"},"provisioner":"p"}]}`, 0, true, ""},
		{"misspelt field", "apiVersion: lvm.topolvm.io/v1alpha1\nkind: LVMCluster\nmetadata: {name: a}\nspec: {storage: {deviceClasses: [{name: vg1, optionalpaths: [/dev/sdb]}]}}\n", 0, false,
			`document 1: LVMCluster a: strict decoding error: unknown field "spec.storage.deviceClasses[0].optionalpaths"`},
		{"other API version", "apiVersion: lvm.topolvm.io/v2alpha1\nkind: LVMCluster\nmetadata: {name: a}\n", 0, false, "LVMCluster has apiVersion lvm.topolvm.io/v2alpha1"},
		{"not YAML", "{{{", 0, false, "document 1 is not YAML or JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := plan.Decode([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(objs.Clusters) != tc.clusters || (objs.Existing() != nil) != tc.classes {
				t.Errorf("got %d clusters, classes %v; want %d, %v", len(objs.Clusters), objs.Existing() != nil, tc.clusters, tc.classes)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	objs, err := plan.Decode([]byte(twoClusters))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, pick string
		n          int
		want       string
		wantErr    string
	}{
		{"by name", "b", 2, "b", ""},
		{"the only one", "", 1, "a", ""},
		{"several without a name", "", 2, "", "f.yaml has 2 LVMClusters (ns1/a, ns2/b): name the one to plan"},
		{"unknown name", "c", 2, "", "no LVMCluster named c in f.yaml; it has ns1/a, ns2/b"},
		{"none", "", 0, "", "no LVMCluster in f.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := plan.Select(objs.Clusters[:tc.n], tc.pick, "f.yaml")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || c.Name != tc.want {
				t.Fatalf("got %v, %v; want %s", c, err, tc.want)
			}
		})
	}
}
