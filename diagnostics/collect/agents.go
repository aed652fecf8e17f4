package collect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

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
		token, err := r.agentToken(ctx)
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

// agentToken is the bearer token sent to the node agents: the one given; else one minted for the service
// account given; else, for a service account caller, one minted for itself; else the caller's own token
// (static, from a file, or from an exec or auth-provider plugin).
func (r *run) agentToken(ctx context.Context) (string, error) {
	if r.opts.AgentToken != "" {
		return r.opts.AgentToken, nil
	}
	if sa := r.opts.AgentServiceAccount; sa != "" {
		ns, name, ok := strings.Cut(sa, "/")
		if !ok || ns == "" || name == "" {
			return "", fmt.Errorf("--agent-service-account %q: use namespace/name", sa)
		}
		return diagnostics.MintToken(ctx, r.cs.CoreV1().ServiceAccounts(ns), name, 10*time.Minute)
	}
	r.mu.Lock()
	user := r.manifest.User
	r.mu.Unlock()
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			if tok, err := diagnostics.MintToken(ctx, r.cs.CoreV1().ServiceAccounts(ns), name, 10*time.Minute); err == nil {
				return tok, nil
			}
		}
	}
	return callerToken(ctx, r.opts.Config)
}

// errNoToken says what to do when the credentials carry no bearer token.
var errNoToken = errors.New("the node agents' diagnostics need a bearer token, and these credentials have none " +
	"(a client certificate, for example): pass --agent-service-account=<namespace>/<name> naming a service account " +
	"that may get lvmnodes/diagnostics (a short-lived token is minted for it), or --agent-token")

// callerToken returns the bearer token the caller's configuration sends to the API server.
func callerToken(ctx context.Context, cfg *rest.Config) (string, error) {
	if cfg.BearerToken != "" {
		return cfg.BearerToken, nil
	}
	if cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return "", fmt.Errorf("read the token file %s: %w", cfg.BearerTokenFile, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if cfg.ExecProvider == nil && cfg.AuthProvider == nil {
		return "", errNoToken
	}
	// A plugin sets the header on each request: make one and keep what it sent.
	var seen string
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if v, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
				seen = v
			}
			return rt.RoundTrip(req)
		})
	})
	rc, err := rest.UnversionedRESTClientFor(withCodec(c))
	if err != nil {
		return "", fmt.Errorf("client to read the caller's token: %w", err)
	}
	_, _ = rc.Get().AbsPath("/version").DoRaw(ctx)
	if seen == "" {
		return "", errNoToken
	}
	return seen, nil
}

// withCodec gives a copied configuration the codec an unversioned REST client needs.
func withCodec(c *rest.Config) *rest.Config {
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
