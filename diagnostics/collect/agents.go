package collect

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lvms-dev/lvms/diagnostics/bundle"
	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
)

// AgentFetcher fetches a node agent's view.
type AgentFetcher interface {
	Fetch(ctx context.Context, pod *corev1.Pod, port int) (*diagnostics.View, error)
}

// clientFetcher fetches through nodeagent/diagnostics.Client, by proxy or directly.
type clientFetcher struct {
	client *diagnostics.Client
	direct bool
}

func (f clientFetcher) Fetch(ctx context.Context, pod *corev1.Pod, port int) (*diagnostics.View, error) {
	if f.direct {
		if pod.Status.PodIP == "" {
			return nil, fmt.Errorf("node agent pod %s/%s has no IP yet", pod.Namespace, pod.Name)
		}
		return f.client.Direct(ctx, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)))
	}
	return f.client.ViaProxy(ctx, pod.Namespace, pod.Name, port)
}

// agentPort is the pod's diagnostics container port, else diagnostics.DefaultPort.
func agentPort(p *corev1.Pod) int {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == diagnostics.PortName {
				return int(cp.ContainerPort)
			}
		}
	}
	return diagnostics.DefaultPort
}

// agentCollectors: one per node agent pod, or one failing collector when there is no token to send.
func (r *run) agentCollectors(ctx context.Context) []collector {
	r.mu.Lock()
	pods := append([]corev1.Pod(nil), r.facts.agentPods...)
	r.mu.Unlock()
	if len(pods) == 0 {
		return nil
	}
	fetcher := r.opts.Agents
	if fetcher == nil {
		token, err := r.agentToken(ctx, pods[0].Namespace)
		if err != nil {
			return []collector{{name: "node-agents", run: func(context.Context, *tally) error { return err }}}
		}
		client := &diagnostics.Client{REST: r.cs.CoreV1().RESTClient(), Token: token}
		fetcher = clientFetcher{client: client, direct: r.opts.AgentAccess == AccessDirect}
	}
	var cs []collector
	for i := range pods {
		p := &pods[i]
		node := p.Spec.NodeName
		if node == "" {
			node = "(unscheduled) " + p.Name
		}
		cs = append(cs, collector{name: "node/" + node, run: func(ctx context.Context, t *tally) error {
			return r.agentView(ctx, t, fetcher, p)
		}})
	}
	return cs
}

func (r *run) agentView(ctx context.Context, t *tally, f AgentFetcher, p *corev1.Pod) error {
	if p.Spec.NodeName == "" {
		return fmt.Errorf("node agent pod %s/%s is not scheduled to a node", p.Namespace, p.Name)
	}
	if p.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("node agent pod %s/%s on %s is %s, not Running: no view", p.Namespace, p.Name, p.Spec.NodeName, orUnknown(string(p.Status.Phase)))
	}
	start := r.opts.Clock.Now()
	v, err := f.Fetch(ctx, p, agentPort(p))
	rtt := r.opts.Clock.Now().Sub(start)
	if err != nil {
		return err
	}
	if v.Node != p.Spec.NodeName {
		return fmt.Errorf("node agent pod %s/%s runs on %s but its view is of %q", p.Namespace, p.Name, p.Spec.NodeName, v.Node)
	}
	files, err := bundle.NodeFiles(v, p.Namespace+"/"+p.Name, start.Add(rtt/2), rtt)
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(files) {
		path, err := bundle.NodePath(v.Node, name)
		if err != nil {
			return err
		}
		if err := t.write(path, files[name]); err != nil {
			return err
		}
	}
	if len(v.Errors) > 0 {
		var parts []string
		for _, e := range v.Errors {
			parts = append(parts, e.Section+": "+e.Error)
		}
		return fmt.Errorf("the agent on %s could not read: %s", v.Node, strings.Join(parts, "; "))
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

// DefaultAgentServiceAccount is the service account (in the node agents' namespace, deploy/operator/bundle.yaml)
// a bundle mints its short-lived diagnostics token for when none is named.
const DefaultAgentServiceAccount = "lvms-bundle"

// agentToken is the bearer token sent to the node agents: the one given, else a short-lived token with the
// diagnostics audience minted for a service account (by default lvms-bundle in ns). The caller's own token
// is never sent: every node agent would get it, and a compromised node could use it against the API server.
func (r *run) agentToken(ctx context.Context, ns string) (string, error) {
	if r.opts.AgentToken != "" {
		return r.opts.AgentToken, nil
	}
	sa := r.opts.AgentServiceAccount
	if sa == "" {
		sa = ns + "/" + DefaultAgentServiceAccount
	}
	saNS, name, ok := strings.Cut(sa, "/")
	if !ok || saNS == "" || name == "" {
		return "", fmt.Errorf("--agent-service-account %q: use namespace/name", sa)
	}
	tok, err := diagnostics.MintToken(ctx, r.cs.CoreV1().ServiceAccounts(saNS), name, 10*time.Minute)
	if err != nil {
		return "", fmt.Errorf("the node agents' diagnostics need a short-lived token minted for service account %s, and minting it failed (%w): "+
			"install deploy/operator/bundle.yaml and get create on serviceaccounts/token for it, name another with --agent-service-account=<namespace>/<name>, "+
			"or pass --agent-token-file with a token for audience %s", sa, err, diagnostics.Audience)
	}
	return tok, nil
}
