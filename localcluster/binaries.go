package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// Binaries names the directories holding the programs of the control plane (the tests find them with
// e2e/clustertest.FindBinaries, lvms local with sandbox.FindBinaries).
type Binaries struct {
	// ControlPlane holds etcd and kube-apiserver (e2e/tools/build.sh, or KUBEBUILDER_ASSETS).
	ControlPlane string
	// Node holds kube-controller-manager, kube-scheduler, kubelet and kubectl (e2e/tools/build-node.sh).
	Node string
}

// path returns the path of program name, which must be an executable file in one of the directories.
func (b Binaries) path(name string) (string, error) {
	dir, script := b.Node, "e2e/tools/build-node.sh"
	if name == "etcd" || name == "kube-apiserver" {
		dir, script = b.ControlPlane, "e2e/tools/build.sh"
	}
	p := filepath.Join(dir, name)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("no executable %s in %q (%s builds it)", name, dir, script)
	}
	return p, nil
}
