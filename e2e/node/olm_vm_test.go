package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/lvms-dev/lvms/e2e/testenv"
)

// The admission policies the operator keeps in place (operator/admission).
var admissionPolicies = []string{"lvms-node-agent-own-node", "lvms-move-requests"}

// olmStyle makes the running install what an OLM install is: the operator's and the node agent's RBAC
// become exactly the bundle's ClusterServiceVersion permissions (the ClusterRoles and Roles the kustomize
// install made, named after their ServiceAccounts, get the CSV's rules), and no admission policy is applied
// by hand: the ones the install applied are deleted. The operator must then create both policies itself with
// the CSV's permissions, and the node agent, with its real pod token, must be refused every write to another
// node's objects (a Node, a LogicalVolume it could make another agent send from).
func (tr *Tier) olmStyle(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "bundle", "manifests", "lvms-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var csv struct {
		Spec struct {
			Install struct {
				Spec struct {
					ClusterPermissions []permission `json:"clusterPermissions"`
					Permissions        []permission `json:"permissions"`
				} `json:"spec"`
			} `json:"install"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &csv); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, p := range csv.Spec.Install.Spec.ClusterPermissions {
		roles = append(roles, roleYAML(t, "ClusterRole", "", p))
	}
	for _, p := range csv.Spec.Install.Spec.Permissions {
		roles = append(roles, roleYAML(t, "Role", Namespace, p))
	}
	if out, err := tr.KubectlIn(strings.Join(roles, "---\n"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the CSV's permissions: %v\n%s", err, out)
	}
	for _, kind := range []string{"validatingadmissionpolicybinding", "validatingadmissionpolicy"} {
		tr.kubectlOK(t, append([]string{"delete", kind, "--ignore-not-found"}, admissionPolicies...)...)
	}
	// The operator sees them go and creates them again, with the CSV's permissions only.
	if err := poll(3*time.Minute, func() bool {
		out, err := tr.Kubectl("get", "validatingadmissionpolicy,validatingadmissionpolicybinding", "-o", "name")
		return err == nil && strings.Count(out, "lvms-node-agent-own-node") == 2 && strings.Count(out, "lvms-move-requests") == 2
	}); err != nil {
		out, _ := tr.Kubectl("-n", Namespace, "logs", "deploy/lvms-operator", "--tail=50")
		t.Fatalf("the operator did not create the admission policies with the CSV's permissions: %v\n%s", err, out)
	}
	managers := tr.kubectlOK(t, "get", "validatingadmissionpolicy", admissionPolicies[0], "-o", "jsonpath={.metadata.managedFields[*].manager}")
	if !strings.Contains(managers, "lvms") {
		t.Errorf("the policy's managers are %q: not the operator's", managers)
	}

	// The node agent, with its own pod's token: another node's objects are out of its reach.
	kubeconfig := tr.agentKubeconfig(t)
	tr.apply(t, `apiVersion: v1
kind: Node
metadata:
  name: node-x
---
apiVersion: topolvm.io/v1
kind: LogicalVolume
metadata:
  name: lv-on-node-x
spec:
  name: lv-on-node-x
  nodeName: node-x
  size: 1Gi
`)
	defer tr.Kubectl("delete", "logicalvolume.topolvm.io/lv-on-node-x", "node/node-x", "--wait=false") //nolint:errcheck
	for _, try := range []struct {
		what string
		args []string
		want string
	}{
		{"relabel another node", []string{"label", "node", "node-x", "stolen=yes"}, "may not write nodes node-x of another node"},
		{"tell another node's agent to send it a volume", []string{"annotate", "logicalvolume.topolvm.io", "lv-on-node-x", "move.lvm.topolvm.io/send-to=node-a/lv-grab/0123456789abcdef"},
			"may not write LogicalVolume lv-on-node-x of node node-x"},
	} {
		out, err := tr.Kubectl(append([]string{"--kubeconfig", kubeconfig}, try.args...)...)
		if err == nil || !strings.Contains(out, try.want) {
			t.Errorf("the node agent of node-a tried to %s: %v\n%s\nwant it refused with %q", try.what, err, out, try.want)
		}
	}
	if labels := tr.kubectlOK(t, "get", "node", "node-x", "-o", "jsonpath={.metadata.labels.stolen}"); labels != "" {
		t.Errorf("node-x was relabelled by node-a's agent")
	}
}

// permission is one entry of a CSV's clusterPermissions or permissions.
type permission struct {
	ServiceAccountName string              `json:"serviceAccountName"`
	Rules              []rbacv1.PolicyRule `json:"rules"`
}

// roleYAML is the (Cluster)Role named after p's ServiceAccount with p's rules, as OLM makes it.
func roleYAML(t *testing.T, kind, ns string, p permission) string {
	t.Helper()
	meta := map[string]any{"name": p.ServiceAccountName}
	if ns != "" {
		meta["namespace"] = ns
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": p.Rules})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// agentKubeconfig is a kubeconfig with the token the kubelet mounted into the node agent's pod on node-a (a
// token bound to that pod, naming its node), read from the node.
func (tr *Tier) agentKubeconfig(t *testing.T) string {
	t.Helper()
	uid := tr.kubectlOK(t, "-n", Namespace, "get", "pods", "-l", "app.kubernetes.io/component=node-agent", "-o", "jsonpath={.items[0].metadata.uid}")
	token := strings.TrimSpace(tr.GuestRunOK(t, "node-a", "sh", "-c", fmt.Sprintf("cat /var/lib/kubelet/pods/%s/volumes/kubernetes.io~projected/*/token | head -c 4096", uid)))
	if token == "" {
		t.Fatal("no service account token in the node agent's pod")
	}
	cfg, err := clientcmd.LoadFromFile(tr.Cluster.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range cfg.AuthInfos {
		a.ClientCertificate, a.ClientKey, a.ClientCertificateData, a.ClientKeyData = "", "", nil, nil
		a.Token = token
		cfg.AuthInfos[name] = a
	}
	path := filepath.Join(t.TempDir(), "agent.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
