package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/operator/apply"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/transferca"
)

// installedNamespace is the namespace deploy/ installs into; the sandbox's may differ.
const installedNamespace = "openshift-storage"

// operatorServiceAccount is the operator's ServiceAccount (deploy/operator/serviceaccount.yaml).
const operatorServiceAccount = "lvms-operator"

// skipped are the files of deploy/operator the sandbox does not apply: it makes its own namespace and runs
// the operator as a process, not a Deployment.
var skipped = []string{"namespace.yaml", "deployment.yaml"}

// installIdentities applies what deploy/operator (with deploy/nodeagent) installs besides the operator's
// Deployment: the ServiceAccounts of the operator and support bundles, the RBAC of those and the node agent, the
// Services and both admission policies, moved to the sandbox's namespace. The operator and the agents then
// act as those ServiceAccounts (operatorKubeconfig, agentKubeconfig), confined by the same rules as in a
// cluster.
func (s *sandbox) installIdentities(ctx context.Context) error {
	var objs []*unstructured.Unstructured
	for _, dir := range []string{"operator", "nodeagent"} {
		o, err := kustomizationObjects(filepath.Join(s.opts.RepoRoot, "deploy", dir))
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	for _, u := range objs {
		// Without the node agent's ServiceAccount the DaemonSet makes no pods: they would stay Pending on
		// nodes that run none, and support bundles would look for the agents in them. The agents run as
		// processes, impersonating the account (which needs no object), under its RBAC all the same.
		if u.GetKind() == "ServiceAccount" && u.GetName() == names.NodeAgent {
			continue
		}
		if u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" && !strings.HasPrefix(u.GetKind(), "ValidatingAdmissionPolicy") {
			u.SetNamespace(s.opts.Namespace)
		}
		if subjects, ok, _ := unstructured.NestedSlice(u.Object, "subjects"); ok {
			for _, sub := range subjects {
				if m, ok := sub.(map[string]any); ok && m["kind"] == "ServiceAccount" && m["namespace"] == installedNamespace {
					m["namespace"] = s.opts.Namespace
				}
			}
			if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
				return err
			}
		}
		if err := apply.Unstructured(ctx, s.c, u, "lvms-local", true); err != nil {
			return fmt.Errorf("install %s %s from deploy/: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// kustomizationObjects decodes the files a kustomization.yaml lists under resources (not the directories
// it includes, nor the skipped files).
func kustomizationObjects(dir string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w (run from the repository or pass --repo)", dir, err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		if !strings.HasSuffix(r, ".yaml") || slices.Contains(skipped, r) {
			continue
		}
		o, err := DecodeFile(filepath.Join(dir, r))
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// DecodeFile reads the objects of a YAML file of one or more documents.
func DecodeFile(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that acts as the ServiceAccount sa of the sandbox's
// namespace by impersonation from the sandbox's admin (who may impersonate anyone), with extra as the
// user's extra values, as a projected token carries them (the node agent's node name).
func (s *sandbox) serviceAccountKubeconfig(file, sa string, extra map[string][]string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(KubeconfigPath(s.opts.StateDir))
	if err != nil {
		return "", fmt.Errorf("read the sandbox's kubeconfig: %w", err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + s.opts.Namespace + ":" + sa
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + s.opts.Namespace, "system:authenticated"}
		a.ImpersonateUserExtra = extra
	}
	path := filepath.Join(s.opts.StateDir, file)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	s.cleanup = append(s.cleanup, func(context.Context) error { return os.Remove(path) })
	return path, nil
}

func (s *sandbox) operatorKubeconfig() (string, error) {
	return s.serviceAccountKubeconfig("operator.kubeconfig", operatorServiceAccount, nil)
}

func (s *sandbox) agentKubeconfig(node string) (string, error) {
	return s.serviceAccountKubeconfig(filepath.Join("nodes", node, "nodeagent.kubeconfig"), names.NodeAgent,
		map[string][]string{transferca.NodeNameExtra: {node}})
}
