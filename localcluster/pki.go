package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity bounds every certificate: long enough for any test run, short enough that a leaked state
// directory is worthless soon. NotBefore is an hour back so a guest whose clock lags still accepts them.
const (
	validity = 7 * 24 * time.Hour
	backdate = time.Hour
)

// authority is the cluster CA: it signs every certificate of the run, and the kubeconfigs made later.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// keyPair is a certificate and its private key, PEM-encoded.
type keyPair struct {
	cert, key []byte
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newAuthority(name string) (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

// clientCert signs a client certificate: Kubernetes takes the user from CN and the groups from O.
func (a *authority) clientCert(user string, groups ...string) (keyPair, error) {
	return a.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// servingCert signs a server certificate for hosts, each an IP address or a DNS name.
func (a *authority) servingCert(cn string, hosts ...string) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return a.sign(tmpl)
}

func (a *authority) sign(tmpl *x509.Certificate) (keyPair, error) {
	key, err := newKey()
	if err != nil {
		return keyPair{}, fmt.Errorf("generate key for %q: %w", tmpl.Subject.CommonName, err)
	}
	sn, err := serial()
	if err != nil {
		return keyPair{}, err
	}
	now := time.Now()
	tmpl.SerialNumber = sn
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-backdate), now.Add(validity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("sign certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: pemBlock("CERTIFICATE", der), key: keyPEM}, nil
}

func privateKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// pki holds the files the components read, all under one directory.
type pki struct {
	dir string
	ca  *authority
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// write stores kp as <name>.crt and <name>.key.
func (p *pki) write(name string, kp keyPair) error {
	if err := os.WriteFile(p.path(name+".crt"), kp.cert, 0o644); err != nil {
		return err
	}
	return os.WriteFile(p.path(name+".key"), kp.key, 0o600)
}

// newPKI creates the CA and every certificate and key the control plane needs in dir. apiHosts go on the
// API server's serving certificate; the controller-manager and the scheduler serve their health endpoints
// on 127.0.0.1 with certificates of the same CA, so readiness checks verify them too.
func newPKI(dir string, apiHosts []string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := newAuthority("lvms-e2e-cluster-ca")
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, ca: ca}
	caKey, err := privateKeyPEM(ca.key)
	if err != nil {
		return nil, err
	}
	// The controller-manager signs kubelet CSRs with the CA itself.
	if err := p.write("ca", keyPair{cert: ca.certPEM, key: caKey}); err != nil {
		return nil, err
	}
	serving := func(cn string, hosts ...string) func() (keyPair, error) {
		return func() (keyPair, error) { return ca.servingCert(cn, hosts...) }
	}
	client := func(user string, groups ...string) func() (keyPair, error) {
		return func() (keyPair, error) { return ca.clientCert(user, groups...) }
	}
	for _, c := range []struct {
		name string
		make func() (keyPair, error)
	}{
		{"apiserver", serving("kube-apiserver", apiHosts...)},
		{"kube-controller-manager-serving", serving("kube-controller-manager", "127.0.0.1", "localhost")},
		{"kube-scheduler-serving", serving("kube-scheduler", "127.0.0.1", "localhost")},
		{"admin", client("lvms-e2e-admin", "system:masters")},
		{"apiserver-kubelet-client", client("kube-apiserver-kubelet-client", "system:masters")},
		{"kube-controller-manager", client("system:kube-controller-manager")},
		{"kube-scheduler", client("system:kube-scheduler")},
	} {
		kp, err := c.make()
		if err != nil {
			return nil, err
		}
		if err := p.write(c.name, kp); err != nil {
			return nil, err
		}
	}
	// The front proxy: the API server forwards requests to aggregated API servers with this client
	// certificate and the user in headers. Its own CA, because whatever it signs may name any user.
	fp, err := newAuthority("lvms-e2e-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.path("front-proxy-ca.crt"), fp.certPEM, 0o644); err != nil {
		return nil, err
	}
	fpClient, err := fp.clientCert("front-proxy-client")
	if err != nil {
		return nil, err
	}
	if err := p.write("front-proxy-client", fpClient); err != nil {
		return nil, err
	}
	// Service account tokens: the API server signs and verifies them, the controller-manager signs the
	// tokens of its controllers' own service accounts.
	sa, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	saKey, err := privateKeyPEM(sa)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.path("sa.key"), saKey, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.path("sa.pub"), pemBlock("PUBLIC KEY", pub), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}
