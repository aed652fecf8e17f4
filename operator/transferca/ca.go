package transferca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"time"

	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
)

const (
	// SignerName is the CertificateSigningRequest signer whose requests the operator signs.
	SignerName = "lvm.topolvm.io/transfer"
	// SecretName is the Secret in the operator's namespace that keeps the CA (tls.crt, tls.key).
	SecretName = "lvms-transfer-ca"
	// CAValidity is how long a new CA is valid; the operator replaces it when less than CertTTL is left.
	CAValidity = 5 * 365 * 24 * time.Hour
	// CertTTL is how long a node's transfer certificate is valid.
	CertTTL = 24 * time.Hour
	// NodeNameExtra is the user-info extra the API server fills from a pod-bound ServiceAccount token.
	NodeNameExtra = "authentication.kubernetes.io/node-name"
	// clockSkew backdates NotBefore so that nodes whose clocks lag a little accept a new certificate.
	clockSkew = 5 * time.Minute
)

// CA is the transfer certificate authority.
type CA struct {
	Cert  *x509.Certificate
	key   *ecdsa.PrivateKey
	clock clock.PassiveClock
}

// New creates a CA valid for CAValidity from the clock's now.
func New(clk clock.PassiveClock) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := clk.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "lvms-transfer-ca"},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, clock: clk}, nil
}

// Parse reads a CA from the PEM of its certificate and key (the Secret's tls.crt and tls.key).
func Parse(certPEM, keyPEM []byte, clk clock.PassiveClock) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("tls.crt holds no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tls.crt: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "EC PRIVATE KEY" {
		return nil, errors.New("tls.key holds no PEM EC private key")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tls.key: %w", err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("tls.crt is not a CA certificate for tls.key")
	}
	return &CA{Cert: cert, key: key, clock: clk}, nil
}

// PEM returns the CA's certificate and key as PEM.
func (ca *CA) PEM() (certPEM, keyPEM []byte, err error) {
	kd, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), nil
}

// NeedsRenewal reports whether the CA expires within CertTTL (the operator then makes a new one).
func (ca *CA) NeedsRenewal() bool {
	return !ca.clock.Now().Add(CertTTL).Before(ca.Cert.NotAfter)
}

// Request is a CertificateSigningRequest as the API server recorded it.
type Request struct {
	// CSR is the PEM certificate request (spec.request).
	CSR []byte
	// Username and Extra are who made it (spec.username, spec.extra), filled in by the API server.
	Username string
	Extra    map[string][]string
}

// Sign checks that req comes from agentUser (system:serviceaccount:<ns>:<name> of the node agent) with a
// token bound to a node, that it asks for a certificate for that node and nothing else, and returns the
// PEM certificate and the node. A refusal says what is wrong.
func (ca *CA) Sign(req Request, agentUser string) (certPEM []byte, node string, err error) {
	if req.Username != agentUser {
		return nil, "", fmt.Errorf("requested by %q: only the node agent (%s) gets transfer certificates", req.Username, agentUser)
	}
	nodes := req.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return nil, "", fmt.Errorf("the request's token is bound to no node (%s is %v): the node agent must use its pod's projected ServiceAccount token", NodeNameExtra, nodes)
	}
	node = nodes[0]
	b, _ := pem.Decode(req.CSR)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, "", errors.New("spec.request holds no PEM certificate request")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, "", fmt.Errorf("spec.request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, "", fmt.Errorf("spec.request is not signed by its key: %w", err)
	}
	pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, "", errors.New("spec.request: the key must be ECDSA P-256")
	}
	if len(csr.DNSNames) != 0 || len(csr.IPAddresses) != 0 || len(csr.EmailAddresses) != 0 || len(csr.URIs) != 1 || csr.URIs[0].String() != blockcopy.NodeURI(node).String() {
		return nil, "", fmt.Errorf("spec.request must name exactly %s (the node the requester's token is bound to) and nothing else", blockcopy.NodeURI(node))
	}
	now := ca.clock.Now()
	notAfter := now.Add(CertTTL)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "lvms-node:" + node},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{blockcopy.NodeURI(node)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.key)
	if err != nil {
		return nil, "", err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), node, nil
}

// serial is a random 128-bit serial number.
func serial() *big.Int {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return new(big.Int).SetBytes(b[:])
}
