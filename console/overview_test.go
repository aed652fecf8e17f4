package console_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

// The overview compares every device without rendering the explanations of rows that do not differ: what
// it says about each node (state, health, counts, differences with their explanations) must still be what
// the node's own page says.
func TestOverviewAgreesWithNodeViews(t *testing.T) {
	for name, snap := range map[string]*console.Snapshot{
		"prepared": prepared(),
		"large":    console.FromObjects(consoletest.Large(120, 16), consoletest.At),
	} {
		t.Run(name, func(t *testing.T) {
			o := console.BuildOverview(snap)
			for _, n := range o.Nodes {
				v, err := console.Node(snap, n.Name)
				if err != nil {
					t.Fatal(err)
				}
				if n.State != v.State || n.Health != v.Health || n.Differences != len(v.Differences) {
					t.Errorf("%s: overview says %s/%s with %d differences, its page %s/%s with %d", n.Name,
						n.State, n.Health, n.Differences, v.State, v.Health, len(v.Differences))
				}
				// Device class differences are listed once for all nodes; the others are the node's own.
				var want, got []console.Difference
				for _, d := range v.Differences {
					if d.DeviceClass == "" {
						want = append(want, d)
					}
				}
				for _, d := range o.Differences {
					if d.Node == n.Name {
						got = append(got, d)
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: the overview's differences are not the node page's (-page +overview):\n%s", n.Name, diff)
				}
			}
		})
	}
}

// The overview is computed once per snapshot; a copy of a snapshot (with a field changed) gets its own.
func TestBuildOverview_OncePerSnapshot(t *testing.T) {
	snap := prepared()
	o := console.BuildOverview(snap)
	if again := console.BuildOverview(snap); again != o {
		t.Error("the overview of the same snapshot was built again")
	}
	later := *snap
	later.At = snap.At.Add(time.Minute)
	if got := console.BuildOverview(&later); got == o || !got.At.Equal(later.At) {
		t.Errorf("the copy's overview is the original's (at %v), want its own at %v", got.At, later.At)
	}
}
