package nodevm

import (
	"testing"
)

// Two nodes get a link whose ends send to each other and route each other's pod subnet; one node gets none.
func TestNew_TwoNodesAreLinked(t *testing.T) {
	ns, err := New([]NodeOptions{{Name: "a"}, {Name: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := ns.nodes[0], ns.nodes[1]
	la, lb := a.net.Link, b.net.Link
	if la == nil || lb == nil || la.LocalPort != lb.RemotePort || lb.LocalPort != la.RemotePort || la.MAC == lb.MAC {
		t.Fatalf("links %+v and %+v: want two ends of one cable", la, lb)
	}
	if got, want := ns.routes(a), "10.244.2.0/24=10.201.0.2"; got != want {
		t.Errorf("node a routes %q, want %q", got, want)
	}
	if got, want := ns.routes(b), "10.244.1.0/24=10.201.0.1"; got != want {
		t.Errorf("node b routes %q, want %q", got, want)
	}
	one, err := New([]NodeOptions{DefaultNode()})
	if err != nil {
		t.Fatal(err)
	}
	if l := one.nodes[0].net.Link; l != nil {
		t.Errorf("a lone node has a link %+v", l)
	}
	if _, err := New([]NodeOptions{{Name: "a"}, {Name: "a"}}); err == nil {
		t.Error("two nodes of one name accepted")
	}
}
