package node

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodevm"
	"github.com/lvms-dev/lvms/sandbox"
)

// Namespace is where the kubernetes overlay installs the operator.
const Namespace = "lvms-system"

// MicroShiftNamespace is where the microshift overlay installs the operator (TopoLVM's before the upgrade).
const MicroShiftNamespace = "openshift-storage"

// overlayNamespace is where an overlay installs the operator.
func overlayNamespace(overlay string) string {
	if overlay == "microshift" {
		return MicroShiftNamespace
	}
	return Namespace
}

// Install installs the product as the README says, with only the image reference overridden (an overlay
// on top of deploy/overlays/<overlay>, as `kustomize edit set image` would write it), and waits for the
// operator's rollout.
func (tr *Tier) Install(t *testing.T, overlay string) {
	t.Helper()
	dir := filepath.Join(tr.dir, "overlay-"+overlay)
	if err := sandbox.Install(context.Background(), tr.kubectl(), dir, overlay, nodevm.LVMSImage, overlayNamespace(overlay)); err != nil {
		t.Fatal(err)
	}
}

// kubectl is the tier's kubectl as the cluster admin, in the repository.
func (tr *Tier) kubectl() sandbox.Kubectl {
	return sandbox.Kubectl{Binary: filepath.Join(tr.Cluster.Binaries.Node, "kubectl"), Kubeconfig: tr.Cluster.AdminKubeconfig, Dir: testenv.RepoRoot()}
}

// kubectlOK runs kubectl and fails the test when it fails, with its output.
func (tr *Tier) kubectlOK(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tr.Kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
