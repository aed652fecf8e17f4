package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/lvms-dev/lvms/e2e/testenv"
)

// Binaries names the directories holding the programs of the control plane.
type Binaries struct {
	// ControlPlane holds etcd and kube-apiserver (e2e/tools/build.sh, or KUBEBUILDER_ASSETS).
	ControlPlane string
	// Node holds kube-controller-manager, kube-scheduler, kubelet and kubectl (e2e/tools/build-node.sh).
	Node string
}

// FindBinaries returns the directories of both builds, building what is missing into the cache (the first
// time this takes many minutes).
func FindBinaries() (Binaries, error) {
	cp, err := testenv.Assets()
	if err != nil {
		return Binaries{}, err
	}
	node, err := NodeBinaries()
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{ControlPlane: cp, Node: node}, nil
}

// NodeBinaries returns the directory e2e/tools/build-node.sh prints, after it has built whatever is missing.
func NodeBinaries() (string, error) {
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "e2e", "tools", "build-node.sh")).Output()
	if err != nil {
		var stderr string
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			stderr = string(ee.Stderr)
		}
		return "", fmt.Errorf("build node binaries with e2e/tools/build-node.sh: %w: %s", err, stderr)
	}
	return strings.TrimSpace(string(out)), nil
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
