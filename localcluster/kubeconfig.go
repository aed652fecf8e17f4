package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig writes a kubeconfig for user in groups, with a client certificate signed by the cluster CA,
// that reaches the API server on 127.0.0.1, and returns its path. A kubelet's is
// Kubeconfig("system:node:<node>", "system:nodes").
func (c *Cluster) Kubeconfig(user string, groups ...string) (string, error) {
	return c.KubeconfigFor(c.Server(), user, groups...)
}

// KubeconfigFor is Kubeconfig for a client that reaches the API server at server (an https URL), such as a
// guest dialing the host's relay. The server's address must be on the serving certificate: 127.0.0.1,
// localhost, an Options.ExtraSANs entry or a name of the kubernetes Service.
func (c *Cluster) KubeconfigFor(server, user string, groups ...string) (string, error) {
	kp, err := c.pki.ca.clientCert(user, groups...)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(c.Dir, "kubeconfig-"+fileSafe(user)+"-*")
	if err != nil {
		return "", fmt.Errorf("kubeconfig for %s: %w", user, err)
	}
	f.Close()
	if err := writeKubeconfig(f.Name(), server, c.CA, user, kp); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// writeKubeconfig writes a kubeconfig with everything embedded, so it stays valid when copied into a guest.
func writeKubeconfig(path, server string, ca []byte, user string, kp keyPair) error {
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"lvms-e2e": {Server: server, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {ClientCertificateData: kp.cert, ClientKeyData: kp.key}},
		Contexts:       map[string]*clientcmdapi.Context{"lvms-e2e": {Cluster: "lvms-e2e", AuthInfo: user}},
		CurrentContext: "lvms-e2e",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// componentKubeconfig writes <name>.kubeconfig in dir from the certificate pki wrote as <name>.crt/key.
func componentKubeconfig(dir string, p *pki, server, name string) (string, error) {
	cert, err := os.ReadFile(p.path(name + ".crt"))
	if err != nil {
		return "", err
	}
	key, err := os.ReadFile(p.path(name + ".key"))
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, writeKubeconfig(path, server, p.ca.certPEM, name, keyPair{cert: cert, key: key})
}

// restConfig is the client configuration of the certificate pki wrote as <name>.crt/key.
func restConfig(p *pki, server, name string) (*rest.Config, error) {
	cert, err := os.ReadFile(p.path(name + ".crt"))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(p.path(name + ".key"))
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.ca.certPEM, CertData: cert, KeyData: key},
		QPS:             100,
		Burst:           200,
	}, nil
}

// fileSafe turns a user name such as system:node:n1 into a file name part.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ':' || r == ' ' {
			return '_'
		}
		return r
	}, s)
}
