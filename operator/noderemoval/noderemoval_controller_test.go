package noderemoval

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lvms-dev/lvms/nodeagent/agent"
)

func TestIsNodeFinalizer(t *testing.T) {
	long := strings.Repeat("n", 80) + ".example.com"
	tests := []struct {
		name string
		f    string
		node string
		want bool
	}{
		{name: "the agent's finalizer", f: agent.VolumeGroupFinalizer("worker-1"), node: "worker-1", want: true},
		{name: "the agent's shortened finalizer of a long node name", f: agent.VolumeGroupFinalizer(long), node: long, want: true},
		{name: "another node's finalizer", f: agent.VolumeGroupFinalizer("worker-2"), node: "worker-1", want: false},
		{name: "a prefix of the node name", f: "cleanup.vgmanager.node.topolvm.io/worker-1", node: "worker-10", want: false},
		{name: "a finalizer without a node", f: "lvmcluster.topolvm.io", node: "worker-1", want: false},
		{name: "another controller's per-node finalizer", f: "example.com/cleanup/worker-1", node: "worker-1", want: true},
		{name: "the node's name alone", f: "worker-1", node: "worker-1", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsNodeFinalizer(tc.f, tc.node); got != tc.want {
				t.Errorf("IsNodeFinalizer(%q, %q) = %v, want %v", tc.f, tc.node, got, tc.want)
			}
		})
	}
}

func TestOwnedByExistingNode(t *testing.T) {
	long := strings.Repeat("n", 80) + ".example.com"
	f := agent.VolumeGroupFinalizer(long)
	short := f[strings.LastIndex(f, "/")+1:] // what a watch maps the finalizer to
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: long}}}
	if !IsNodeFinalizer(f, short) {
		t.Fatalf("the shortened name does not match its own finalizer")
	}
	if !ownedByExistingNode(f, nodes) {
		t.Errorf("the finalizer of an existing long-named node would be removed")
	}
	if ownedByExistingNode(agent.VolumeGroupFinalizer("gone"), nodes) {
		t.Errorf("the finalizer of a deleted node is kept")
	}
}
