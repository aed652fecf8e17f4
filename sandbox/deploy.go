// This file installs LVMS the way the README's Install section says, with kubectl: the CRDs server-side,
// then an overlay of deploy/ with another image.

package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Kubectl runs a kubectl binary against one cluster from a working directory (the repository, so that
// paths such as deploy/crds/ read as the README writes them).
type Kubectl struct {
	Binary, Kubeconfig, Dir string
}

// kubectlTimeout bounds one kubectl call: a wait or rollout names its own shorter timeout.
const kubectlTimeout = 20 * time.Minute

// Run runs kubectl with args (stdin, when not empty, on its standard input) and returns its output; the
// error names the command and carries the output.
func (k Kubectl) Run(ctx context.Context, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.Binary, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	cmd.Dir = k.Dir
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Install applies deploy/crds/ and deploy/crds/legacy/ server-side, then deploy/overlays/<overlay> through
// a kustomization in dir that sets the image to image, and waits for the operator's rollout in namespace.
func Install(ctx context.Context, k Kubectl, dir, overlay, image, namespace string) error {
	if _, err := k.Run(ctx, "", "apply", "--server-side", "-f", "deploy/crds/", "-f", "deploy/crds/legacy/"); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base, err := filepath.Rel(dir, filepath.Join(k.Dir, "deploy", "overlays", overlay)) // kustomize wants it relative
	if err != nil {
		return err
	}
	name, tag, ok := strings.Cut(image, ":")
	if !ok {
		return fmt.Errorf("image %q has no tag", image)
	}
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
		return err
	}
	if _, err := k.Run(ctx, "", "apply", "-k", dir); err != nil {
		return err
	}
	_, err = k.Run(ctx, "", "-n", namespace, "rollout", "status", "deploy/lvms-operator", "--timeout=10m")
	return err
}
