package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// groupSnapshot is a LogicalVolumeGroupSnapshot with the given members (YAML flow sequence).
func groupSnapshot(t *testing.T, name, members string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := fmt.Sprintf("apiVersion: topolvm.io/v1\nkind: LogicalVolumeGroupSnapshot\nmetadata: {name: %s}\nspec: {nodeName: node-a, deviceClass: thin, members: %s}\n", name, members)
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("test YAML: %v", err)
	}
	return u
}

// TestLogicalVolumeGroupSnapshot_Validation: the API server refuses malformed groups with a message that
// says what to change, and a group's spec never changes after creation.
func TestLogicalVolumeGroupSnapshot_Validation(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, members, says string
	}{
		{"no-members", "[]", "should have at least 1 items"},
		{"source-twice", "[{source: db, snapshot: s1}, {source: db, snapshot: s2}]", "each source LogicalVolume may appear once"},
		{"snapshot-twice", "[{source: db, snapshot: s1}, {source: wal, snapshot: s1}]", "give every member its own snapshot name"},
		{"snapshot-is-source", "[{source: db, snapshot: wal}, {source: wal, snapshot: s2}]", "cannot also be a source"},
		{"empty-source", "[{source: '', snapshot: s1}]", "should be at least 1 chars long"},
	} {
		err := env.Client.Create(ctx, groupSnapshot(t, tc.name, tc.members))
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want a refusal saying %q", tc.name, err, tc.says)
		}
	}
	var members []string
	for i := range 33 {
		members = append(members, fmt.Sprintf("{source: v%d, snapshot: s%d}", i, i))
	}
	if err := env.Client.Create(ctx, groupSnapshot(t, "too-many", "["+strings.Join(members, ", ")+"]")); err == nil || !strings.Contains(err.Error(), "must have at most 32 items") {
		t.Errorf("33 members: got %v, want a refusal", err)
	}

	ok := groupSnapshot(t, "ok", "[{source: db, snapshot: g-db}, {source: wal, snapshot: g-wal}]")
	if err := env.Client.Create(ctx, ok); err != nil {
		t.Fatalf("a valid group is refused: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ok) })
	if err := unstructured.SetNestedField(ok.Object, "node-b", "spec", "nodeName"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(ctx, ok); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("moving a group to another node: got %v, want a refusal", err)
	}
}
