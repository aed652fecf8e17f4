package diagnostics

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// DefaultMaxViewBytes caps a view read by a Client.
const DefaultMaxViewBytes = 64 << 20

// Client fetches views from node agents, through the API server's pods/proxy or directly from the pod IP.
type Client struct {
	// REST is the core/v1 REST client of the API server (proxy access).
	REST rest.Interface
	// HTTP is the client for direct access (default: TLS without verification, see the package doc).
	HTTP *http.Client
	// Token is the bearer token sent to the agents.
	Token string
	// MaxBytes caps a view (default DefaultMaxViewBytes).
	MaxBytes int64
}

// ProxyName is the pods/proxy name of a pod's diagnostics port: "https:<pod>:<port>".
func ProxyName(pod string, port int) string { return "https:" + pod + ":" + strconv.Itoa(port) }

// ViaProxy fetches the view of the agent pod namespace/pod through the API server.
func (c *Client) ViaProxy(ctx context.Context, namespace, pod string, port int) (*View, error) {
	if c.REST == nil {
		return nil, errors.New("no API server client for proxy access")
	}
	body, err := c.REST.Get().Namespace(namespace).Resource("pods").Name(ProxyName(pod, port)).SubResource("proxy").
		Suffix(Path).SetHeader(TokenHeader, c.Token).DoRaw(ctx)
	if err != nil {
		return nil, proxyError(namespace, pod, body, err)
	}
	return c.decode(body)
}

// proxyError turns a failed proxied request into a message that says what to do.
func proxyError(namespace, pod string, body []byte, err error) error {
	where := fmt.Sprintf("node agent pod %s/%s", namespace, pod)
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch code := status.Status().Code; {
		case code == http.StatusUnauthorized && len(body) > 0:
			return fmt.Errorf("%s refused the diagnostics token: %s", where, firstLine(body))
		case code == http.StatusForbidden && strings.Contains(string(body), AuthzSubresource):
			return fmt.Errorf("%s: %s", where, firstLine(body))
		case code == http.StatusForbidden:
			return fmt.Errorf("the API server does not let you proxy to %s (you need get on pods/proxy in %s): %w", where, namespace, err)
		}
	}
	return fmt.Errorf("fetch the diagnostics of %s through the API server: %w", where, err)
}

// Direct fetches the view from an agent at host:port (a pod IP), for collectors running in the cluster.
func (c *Client) Direct(ctx context.Context, hostPort string) (*View, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // self-signed, see the package doc
			DialContext:     (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+hostPort+Path, nil)
	if err != nil {
		return nil, fmt.Errorf("diagnostics request to %s: %w", hostPort, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the diagnostics of the node agent at %s: %w", hostPort, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes()+1))
	if err != nil {
		return nil, fmt.Errorf("read the diagnostics of the node agent at %s: %w", hostPort, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the node agent at %s answered %s: %s", hostPort, resp.Status, firstLine(body))
	}
	return c.decode(body)
}

func (c *Client) maxBytes() int64 {
	if c.MaxBytes > 0 {
		return c.MaxBytes
	}
	return DefaultMaxViewBytes
}

func (c *Client) decode(body []byte) (*View, error) {
	if int64(len(body)) > c.maxBytes() {
		return nil, fmt.Errorf("the diagnostics view is larger than %d bytes", c.maxBytes())
	}
	return DecodeView(body)
}

// DecodeView parses a view and refuses one of another API version.
func DecodeView(data []byte) (*View, error) {
	var v View
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("the diagnostics view is not valid JSON: %w", err)
	}
	if v.APIVersion != ViewAPIVersion {
		return nil, fmt.Errorf("the diagnostics view has apiVersion %q; this lvms reads %q: use the same lvms version as the node agents",
			v.APIVersion, ViewAPIVersion)
	}
	return &v, nil
}

// MintToken requests a short-lived token for the service account name (in the client's namespace) whose
// only audience is Audience: the node agents accept it, the API server does not.
func MintToken(ctx context.Context, sas corev1client.ServiceAccountInterface, name string, ttl time.Duration) (string, error) {
	secs := int64(ttl / time.Second)
	if secs < 600 {
		secs = 600 // the API server's minimum
	}
	tr, err := sas.CreateToken(ctx, name, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences: []string{Audience}, ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a diagnostics token for service account %s: %w", name, err)
	}
	return tr.Status.Token, nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > maxEmbeddedOutput {
		s = s[:maxEmbeddedOutput] + "..."
	}
	return s
}
