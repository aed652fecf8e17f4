package components

import (
	"context"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console"
)

// A class check renders what is known: exists, missing, provisions elsewhere, or cannot be known (with why).
func TestClassCheck_SaysWhatIsKnown(t *testing.T) {
	for _, tc := range []struct {
		c    console.ClassCheck
		want string
		not  []string
	}{
		{console.ClassCheck{Name: "lvms-fast", InCluster: true, Matches: true}, "exists", []string{"missing", "cannot be known"}},
		{console.ClassCheck{Name: "lvms-fast", Differs: true}, "missing", []string{"exists", "cannot be known"}},
		{console.ClassCheck{Name: "lvms-fast", Unknown: "the cluster does not serve snapshot.storage.k8s.io/v1"},
			"cannot be known", []string{"exists", "missing"}},
	} {
		var b strings.Builder
		if err := ClassCheck(&tc.c).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !strings.Contains(out, tc.want) || !strings.Contains(out, tc.c.Unknown) {
			t.Errorf("%+v renders %q, want %q", tc.c, out, tc.want)
		}
		for _, n := range tc.not {
			if strings.Contains(out, ">"+n+"<") {
				t.Errorf("%+v renders %q, which says %q", tc.c, out, n)
			}
		}
	}
}
