package blockcopy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/url"

	"fmt"
	"k8s.io/utils/clock"
)

// NewKeyAndRequest makes a node agent's transfer key (ECDSA P-256, it never leaves the node) and the PEM
// certificate request for node that the operator's transfer CA signs.
func NewKeyAndRequest(node string) (keyPEM, csrPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "lvms-node:" + node},
		URIs:    []*url.URL{NodeURI(node)},
	}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("make the transfer certificate request: %w", err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}), nil
}

// LoadIdentity builds node's Identity from its PEM key, the PEM certificate the CA issued and the PEM CA
// certificate.
func LoadIdentity(node string, keyPEM, certPEM, caPEM []byte, clk clock.PassiveClock) (*Identity, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the transfer certificate and key: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("the transfer CA holds no PEM certificate")
	}
	return NewIdentity(node, cert, roots, clk)
}

// SplitIssued splits what the operator's signer puts in a request's status.certificate: the node's
// certificate first, then the transfer CA's.
func SplitIssued(bundle []byte) (certPEM, caPEM []byte, err error) {
	first, rest := pem.Decode(bundle)
	if first == nil || first.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("the issued certificate holds no PEM certificate")
	}
	if ca, _ := pem.Decode(rest); ca == nil || ca.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("the issued certificate is not followed by the transfer CA's")
	}
	return pem.EncodeToMemory(first), rest, nil
}
