package blockcopy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// NodeURIScheme and nodeURIHost make the URI SAN that names a node in a transfer certificate:
// lvms-node://node/<node name>. A certificate names exactly one node.
const (
	NodeURIScheme = "lvms-node"
	nodeURIHost   = "node"
)

// NodeURI is the URI SAN of a transfer certificate for node.
func NodeURI(node string) *url.URL {
	return &url.URL{Scheme: NodeURIScheme, Host: nodeURIHost, Path: "/" + node}
}

// ErrPeerRefused marks a peer whose certificate does not prove the node it must be.
var ErrPeerRefused = errors.New("transfer peer refused")

// NodeName returns the node a transfer certificate names, or an error when it names none or several.
func NodeName(cert *x509.Certificate) (string, error) {
	var nodes []string
	for _, u := range cert.URIs {
		if u.Scheme != NodeURIScheme {
			continue
		}
		name := strings.TrimPrefix(u.Path, "/")
		if u.Host != nodeURIHost || name == "" || strings.Contains(name, "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return "", fmt.Errorf("certificate %q has a malformed node URI %q", cert.Subject.CommonName, u.String())
		}
		nodes = append(nodes, name)
	}
	switch len(nodes) {
	case 0:
		return "", fmt.Errorf("certificate %q names no node (no %s:// URI)", cert.Subject.CommonName, NodeURIScheme)
	case 1:
		return nodes[0], nil
	}
	return "", fmt.Errorf("certificate %q names %d nodes %v, a transfer certificate names one", cert.Subject.CommonName, len(nodes), nodes)
}

// Identity is a node agent's transfer credentials: its certificate (for its own node) and the transfer
// CA that every peer's certificate must chain to.
type Identity struct {
	node  string
	cert  tls.Certificate
	roots *x509.CertPool
	clock clock.PassiveClock
}

// NewIdentity checks that cert names node (an agent acts for its own node only) and returns the
// identity. clk is the clock certificates are checked against (nil: the real clock).
func NewIdentity(node string, cert tls.Certificate, roots *x509.CertPool, clk clock.PassiveClock) (*Identity, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if len(cert.Certificate) == 0 {
		return nil, errors.New("no transfer certificate")
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parse the transfer certificate: %w", err)
		}
		cert.Leaf = leaf
	}
	got, err := NodeName(leaf)
	if err != nil {
		return nil, err
	}
	if got != node {
		return nil, fmt.Errorf("the transfer certificate is for node %q, this agent runs on %q: an agent acts for its own node only", got, node)
	}
	if roots == nil {
		return nil, errors.New("no transfer CA to check peers against")
	}
	return &Identity{node: node, cert: cert, roots: roots, clock: clk}, nil
}

// Node is the node this identity acts for.
func (id *Identity) Node() string { return id.node }

// NotAfter is when the identity's certificate expires (ask for a new one well before).
func (id *Identity) NotAfter() time.Time { return id.cert.Leaf.NotAfter }

// ServerConfig is the TLS configuration of the side that listens (the receiver), accepting only a
// client whose certificate chains to the transfer CA and names peerNode.
func (id *Identity) ServerConfig(peerNode string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.cert},
		ClientAuth:   tls.RequireAnyClientCert, // verified below, against the CA and the node
		Time:         id.clock.Now,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return id.verifyPeer(cs.PeerCertificates, x509.ExtKeyUsageClientAuth, peerNode)
		},
	}
}

// ClientConfig is the TLS configuration of the side that dials (the sender), accepting only a server
// whose certificate chains to the transfer CA and names peerNode.
func (id *Identity) ClientConfig(peerNode string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.cert},
		// The server is checked below against the CA and the node it must be, not a host name: nodes are
		// reached by IP and a node's name is what its certificate proves.
		InsecureSkipVerify: true,
		Time:               id.clock.Now,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return id.verifyPeer(cs.PeerCertificates, x509.ExtKeyUsageServerAuth, peerNode)
		},
	}
}

// verifyPeer checks that the chain leads to the transfer CA at the clock's time, for usage, and that the
// leaf names want.
func (id *Identity) verifyPeer(chain []*x509.Certificate, usage x509.ExtKeyUsage, want string) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: it presented no certificate", ErrPeerRefused)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         id.roots,
		Intermediates: inter,
		CurrentTime:   id.clock.Now(),
		KeyUsages:     []x509.ExtKeyUsage{usage},
	}); err != nil {
		return fmt.Errorf("%w: its certificate is not from the LVMS transfer CA or not valid now: %v", ErrPeerRefused, err)
	}
	got, err := NodeName(chain[0])
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPeerRefused, err)
	}
	if got != want {
		return fmt.Errorf("%w: its certificate is for node %q, expected node %q", ErrPeerRefused, got, want)
	}
	return nil
}
