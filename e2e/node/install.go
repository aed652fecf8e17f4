package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodevm"
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
	root := testenv.RepoRoot()
	tr.kubectlOK(t, "apply", "--server-side", "-f", "deploy/crds/", "-f", "deploy/crds/legacy/")
	dir := filepath.Join(tr.dir, "overlay-"+overlay)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, filepath.Join(root, "deploy", "overlays", overlay)) // kustomize wants it relative
	if err != nil {
		t.Fatal(err)
	}
	name, tag, _ := strings.Cut(nodevm.LVMSImage, ":")
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: quay.io/lvms/lvms
    newName: %s
    newTag: %s
`, base, name, tag)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	tr.kubectlOK(t, "apply", "-k", dir)
	tr.kubectlOK(t, "-n", overlayNamespace(overlay), "rollout", "status", "deploy/lvms-operator", "--timeout=10m")
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
