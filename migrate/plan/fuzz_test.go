package plan_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/lvms-dev/lvms/migrate/plan"
)

// FuzzPlan decodes arbitrary input and plans every LVMCluster in it. Whatever the input: no panic; a
// refusal is an *InvalidError; a plan satisfies checkInvariants, leaves the LVMCluster untouched, renders
// as text, YAML and JSON, and is the same when built twice.
func FuzzPlan(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join(samples, "lvm_v1alpha1_lvmcluster*.yaml"))
	for _, path := range append(seeds, more...) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"apiVersion":"lvm.topolvm.io/v1alpha1","kind":"LVMCluster","metadata":{"name":"c","namespace":"n"},"spec":{"storage":{"deviceClasses":[{"name":"a","nodeSelector":{"nodeSelectorTerms":[]}}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := plan.Decode(data)
		if err != nil {
			return
		}
		for i := range objs.Clusters[:min(len(objs.Clusters), 4)] {
			c := &objs.Clusters[i]
			before := c.DeepCopy()
			in := plan.Input{Cluster: c, Existing: objs.Existing()}
			p, err := plan.Build(in)
			if !equality.Semantic.DeepEqual(before, c) {
				t.Fatalf("Build changed the LVMCluster it was given")
			}
			if err != nil {
				var invalid *plan.InvalidError
				if !errors.As(err, &invalid) {
					t.Fatalf("refusal is a %T, not an *InvalidError: %v", err, err)
				}
				continue
			}
			if err := checkInvariants(c, p); err != nil {
				t.Fatalf("%v\ninput:\n%s", err, data)
			}
			if err := plan.WriteText(io.Discard, p); err != nil {
				t.Fatal(err)
			}
			y1, err := plan.YAML(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := plan.JSON(p); err != nil {
				t.Fatal(err)
			}
			again, err := plan.Build(in)
			if err != nil {
				t.Fatalf("second Build failed: %v", err)
			}
			if y2, _ := plan.YAML(again); !bytes.Equal(y1, y2) {
				t.Fatalf("two Builds differ:\n%s\n---- vs ----\n%s", y1, y2)
			}
		}
	})
}
